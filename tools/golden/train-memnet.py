#!/usr/bin/env python3
"""Trains an end-to-end memory network (Sukhbaatar et al., NeurIPS 2015) on generated bAbI-style
stories and exports it for `pagoda memnet`.

Python: PyTorch 2.x, safetensors and numpy (the peers' venv has them):
    .deps/peers-venv/bin/python tools/golden/train-memnet.py --out /tmp/memnet

The stories are generated, seeded, in bAbI's text format (numbered lines; a question line holds
the question, a tab, the answer, a tab, the ids of the supporting facts): people move between
rooms (task 1, "Where is Mary?", one supporting fact) and pick up and drop objects (task 2,
"Where is the apple?": the fact that moved the object to its holder and the one that moved the
holder, two supporting facts). The model: K = 3 hops over the last --memory sentences,
embeddings with adjacent weight tying (A^{k+1} = C^k, B = A^1, the answer matrix W = C^Kᵀ),
position encoding of the words (l_kj = (1 - j/J) - (k/d)(1 - 2j/J)), temporal encoding of the
sentences (T_A^{k+1} = T_C^k; index 0 is the most recent sentence), empty memory slots masked:

    m_i = Σ_j l_j ⊙ A^k[x_ij] + T_A^k[i],  c_i likewise with C^k,  u^1 = Σ_j l_j ⊙ B[q_j]
    p = softmax(uᵀ m_i),  o = Σ_i p_i c_i,  u ← u + o         (K times)
    logits = C^K u                                              (over the vocabulary)

Writes into --out:
    memnet.safetensors   embed.0 .. embed.K [V, d], temporal.0 .. temporal.K [M, d];
                         __metadata__: format "pagoda-memn2n", hops, memory_size,
                         sentence_size, vocab (the words, space-separated; index 0 is the
                         empty word "<nil>")
    memnet-test.txt      test stories in bAbI's format
    memnet-expected.safetensors  PyTorch's logits [Q, V] F32, pred [Q] I64 (word indices) and
                         attention [Q, K, M] F32 (each hop's p; zero on empty slots), in the
                         order of the questions in memnet-test.txt
    memnet.json          accuracy per task on the test stories, sizes, training time

--golden writes the small version tests/data/memnet{,-test,-expected}.* (a shorter training, 40
test stories) read by tests/test_memnet.c.
"""
import argparse
import json
import os
import random
import re
import time

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

import goldenlib

DATA = goldenlib.DATA
PEOPLE = ["Mary", "John", "Sandra", "Daniel"]
PLACES = ["bathroom", "hallway", "kitchen", "garden", "office", "bedroom"]
OBJECTS = ["apple", "football", "milk"]
MOVES = ["moved to", "went to", "journeyed to", "travelled to", "went back to"]
TAKES = ["picked up", "got", "grabbed", "took"]
DROPS = ["dropped", "discarded", "put down", "left"]


def story(rng, task, length):
    """One story as a list of (text, answer or None, supporting ids); ids are 1-based lines."""
    where, holder, obj_at = {}, {}, {}
    last_move, last_take = {}, {}
    lines = []
    while len(lines) < length:
        p = rng.choice(PEOPLE)
        kind = "move" if task == 1 or rng.random() < 0.6 else "obj"
        if kind == "move":
            l = rng.choice([x for x in PLACES if x != where.get(p)])
            where[p] = l
            lines.append((f"{p} {rng.choice(MOVES)} the {l}.", None, []))
            last_move[p] = len(lines)
            for o, h in holder.items():
                if h == p:
                    obj_at[o] = l
        elif p in where:
            held = [o for o, h in holder.items() if h == p]
            free = [o for o in OBJECTS if o not in holder]
            if held and (not free or rng.random() < 0.4):
                o = rng.choice(held)
                del holder[o]
                lines.append((f"{p} {rng.choice(DROPS)} the {o}.", None, []))
                last_take[o] = len(lines)
            elif free:
                o = rng.choice(free)
                holder[o] = p
                obj_at[o] = where[p]
                lines.append((f"{p} {rng.choice(TAKES)} the {o}.", None, []))
                last_take[o] = len(lines)
        # A question now and then, about someone or something whose place is known.
        if len(lines) >= 2 and rng.random() < 0.3:
            if task == 1 and where:
                p = rng.choice(sorted(where))
                lines.append((f"Where is {p}?", where[p], [last_move[p]]))
            elif task == 2 and obj_at:
                o = rng.choice(sorted(obj_at))
                h = holder.get(o)
                sup = [last_take[o]] + ([last_move[h]] if h and last_move[h] > last_take[o] else [])
                lines.append((f"Where is the {o}?", obj_at[o], sorted(sup)))
    return lines


def write_babi(stories, path):
    with open(path, "w") as f:
        for s in stories:
            for i, (text, ans, sup) in enumerate(s, 1):
                if ans is None:
                    f.write(f"{i} {text}\n")
                else:
                    f.write(f"{i} {text}\t{ans}\t{' '.join(map(str, sup))}\n")


def words(text):
    return re.findall(r"[a-z]+", text.lower())


def examples(stories, memory):
    """(sentences of the story so far, question words, answer word, task) per question."""
    out = []
    for task, s in stories:
        facts = []
        for text, ans, _ in s:
            if ans is None:
                facts.append(words(text))
            else:
                out.append((facts[-memory:], words(text), ans, task))
    return out


def encode(exs, vocab, memory, sent):
    n = len(exs)
    S = torch.zeros(n, memory, sent, dtype=torch.long)
    Q = torch.zeros(n, sent, dtype=torch.long)
    A = torch.zeros(n, dtype=torch.long)
    for i, (facts, q, a, _) in enumerate(exs):
        # Slot 0 is the most recent sentence.
        for k, f in enumerate(reversed(facts)):
            S[i, k, :len(f)] = torch.tensor([vocab[w] for w in f])
        Q[i, :len(q)] = torch.tensor([vocab[w] for w in q])
        A[i] = vocab[a]
    return S, Q, A


def position_encoding(J, d):
    j = torch.arange(1, J + 1, dtype=torch.float32).unsqueeze(1)
    k = torch.arange(1, d + 1, dtype=torch.float32).unsqueeze(0)
    return (1 - j / J) - (k / d) * (1 - 2 * j / J)  # [J, d]


class MemN2N(torch.nn.Module):
    def __init__(self, V, d, memory, sent, hops):
        super().__init__()
        self.hops = hops
        self.embed = torch.nn.ModuleList(torch.nn.Embedding(V, d, padding_idx=0)
                                         for _ in range(hops + 1))
        self.temporal = torch.nn.ModuleList(torch.nn.Embedding(memory, d)
                                            for _ in range(hops + 1))
        for e in list(self.embed) + list(self.temporal):
            torch.nn.init.normal_(e.weight, std=0.1)
        with torch.no_grad():
            for e in self.embed:
                e.weight[0].zero_()
        self.register_buffer("pe", position_encoding(sent, d))

    def bag(self, k, x):
        return (self.embed[k](x) * self.pe).sum(-2)

    def forward(self, S, Q, probs=False):
        mask = (S != 0).any(-1)                      # [B, M]: slots holding a sentence
        u = self.bag(0, Q)                           # [B, d]
        ps = []
        for k in range(self.hops):
            m = self.bag(k, S) + self.temporal[k].weight
            c = self.bag(k + 1, S) + self.temporal[k + 1].weight
            scores = (m * u.unsqueeze(1)).sum(-1).masked_fill(~mask, float("-inf"))
            p = torch.softmax(scores, -1)
            ps.append(p)
            u = u + (p.unsqueeze(-1) * c).sum(1)
        logits = u @ self.embed[self.hops].weight.t()
        return (logits, torch.stack(ps, 1)) if probs else logits


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="memnet-out")
    ap.add_argument("--stories", type=int, default=2000, help="training stories per task")
    ap.add_argument("--test-stories", type=int, default=200, help="test stories per task")
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--dim", type=int, default=32)
    ap.add_argument("--hops", type=int, default=3)
    ap.add_argument("--memory", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--golden", action="store_true")
    a = ap.parse_args()
    if a.golden:
        a.out, a.stories, a.test_stories, a.epochs, a.dim = DATA, 1500, 20, 25, 16
    # A tiny model: one thread beats several (which only contend on a shared machine).
    torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    rng = random.Random(a.seed)
    train = [(t, story(rng, t, rng.randint(6, 20))) for t in (1, 2) for _ in range(a.stories)]
    test = [(t, story(rng, t, rng.randint(6, 20))) for t in (1, 2) for _ in range(a.test_stories)]
    vocab_words = sorted({w for _, s in train + test for text, ans, _ in s
                          for w in words(text) + ([ans] if ans else [])})
    vocab = {w: i + 1 for i, w in enumerate(vocab_words)}
    V = len(vocab) + 1
    tr, te = examples(train, a.memory), examples(test, a.memory)
    sent = max(len(x) for e in tr + te for x in e[0] + [e[1]])
    S, Q, A = encode(tr, vocab, a.memory, sent)
    St, Qt, At = encode(te, vocab, a.memory, sent)
    model = MemN2N(V, a.dim, a.memory, sent, a.hops)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=max(1, a.epochs // 3), gamma=0.5)
    t0 = time.time()
    for epoch in range(a.epochs):
        model.train()
        perm = torch.randperm(len(A))
        total = 0.0
        for b in range(0, len(A), 64):
            idx = perm[b:b + 64]
            opt.zero_grad()
            loss = F.cross_entropy(model(S[idx], Q[idx]), A[idx])
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 40.0)
            opt.step()
            with torch.no_grad():
                for e in model.embed:
                    e.weight[0].zero_()
            total += loss.item() * len(idx)
        sched.step()
        if epoch % 5 == 0 or epoch == a.epochs - 1:
            model.eval()
            with torch.no_grad():
                acc = (model(St, Qt).argmax(1) == At).float().mean().item()
            print(f"epoch {epoch:3d}  loss {total / len(A):.4f}  test acc {acc:.4f}", flush=True)
    train_s = time.time() - t0
    model.eval()
    with torch.no_grad():
        logits, probs = model(St, Qt, probs=True)
    pred = logits.argmax(1)
    tasks = torch.tensor([e[3] for e in te])
    acc = {f"task{t}": (pred[tasks == t] == At[tasks == t]).float().mean().item() for t in (1, 2)}
    acc["all"] = (pred == At).float().mean().item()
    os.makedirs(a.out, exist_ok=True)
    state = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()
             if k != "pe"}
    meta = {"format": "pagoda-memn2n", "hops": str(a.hops), "memory_size": str(a.memory),
            "sentence_size": str(sent), "vocab": " ".join(["<nil>"] + vocab_words)}
    save_file(state, os.path.join(a.out, "memnet.safetensors"), metadata=meta)
    write_babi([s for _, s in test], os.path.join(a.out, "memnet-test.txt"))
    save_file({"logits": logits.contiguous(), "pred": pred.contiguous(),
               "attention": probs.contiguous()},
              os.path.join(a.out, "memnet-expected.safetensors"))
    info = {"accuracy": acc, "train_seconds": train_s, "vocab": V, "dim": a.dim, "hops": a.hops,
            "memory": a.memory, "sentence_size": sent, "train_questions": len(A),
            "test_questions": len(At), "torch": torch.__version__}
    with open(os.path.join(a.out, "memnet.json"), "w") as f:
        json.dump(info, f, indent=1)
    print(json.dumps(info))


if __name__ == "__main__":
    main()
