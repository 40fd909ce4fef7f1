#!/usr/bin/env python3
"""Makes the GPT-2 golden files in tests/data/: tiny random GPT-2 models from transformers, a
byte-level BPE trained here with `tokenizers` (no network: the text is Python's standard
library), the logits of a left-padded batch and transformers' greedy generate.

Two models, read by tests/test_gpt2.c:
  gpt2-tiny/   GPT2LMHeadModel as save_pretrained writes it ("transformer." names, lm_head tied
               and left out), n_embd 48, 4 heads, 2 layers; vocab.json + merges.txt
  gpt2-bare/   the bare GPT2Model naming (no prefix, as openai-community/gpt2's file), n_embd
               32, 2 heads, 2 layers, with a stray "h.N.attn.bias" causal buffer as the hub's
               older files have; tokenizer.json
Each folder also holds config.json and golden.json: the prompts, their ids (the tokenizer's),
the left-padded batch (ids, attention_mask, position ids as generate computes them for left
padding: cumsum(mask) - 1, padding at 1), and the greedy continuation of each prompt
(generate(do_sample=False), MAX_NEW new tokens, batch left-padded, eos the config's). logits.bin
holds the batch's logits [B, T, vocab] as little-endian float32.

Sensitive (tools/golden/goldenlib.py): the query and key columns of every c_attn (Conv1D: [in, 3·D],
q|k|v along the columns) are scaled by QK_SHARPEN, so each softmax row peaks; the script checks
that another head count moves the logits' prompt-dependent part far beyond the tests'
tolerance, that a token appended after a prompt cannot change the prompt's logits (causal),
that dropping the causal mask would change them, and that generate's tokens equal a greedy loop
of full recomputations with the position ids above (what tests/test_gpt2.c runs).

    /work/main/.deps-torch/bin/python tools/golden/make-gpt2-golden.py
(torch 2.15, transformers 5.25, tokenizers 0.23 made the files.)
"""
import json
import os
import sys
import sysconfig

import numpy as np
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import GPT2Config, GPT2LMHeadModel, GPT2TokenizerFast

import goldenlib

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "data")
VOCAB = 384
MAX_NEW = 64
QK_SHARPEN = 2.5
PROMPTS = ["Once upon a time", "def main(argv):\n    return", "import os, sys"]
CASES = {
    "gpt2-tiny": dict(n_embd=48, n_head=4, n_layer=2, n_positions=96, seed=41, json=False),
    "gpt2-bare": dict(n_embd=32, n_head=2, n_layer=2, n_positions=80, seed=42, json=True),
}


def corpus():
    root = sysconfig.get_paths()["stdlib"]
    out = []
    for name in sorted(os.listdir(root)):
        if name.endswith(".py"):
            with open(os.path.join(root, name), encoding="utf-8", errors="replace") as f:
                out += f.read().split("\n")
        if sum(len(x) for x in out) > 600_000:
            break
    return out


def train_bpe(lines):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.train_from_iterator(lines, trainers.BpeTrainer(
        vocab_size=VOCAB, special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return tok


def randomise(model, seed):
    """Every parameter random, LayerNorm scales near 1, then q and k sharpened."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")):
                p.copy_(1 + 0.2 * (torch.rand(p.shape, generator=g) - 0.5))
            elif name.endswith("wte.weight") or name.endswith("wpe.weight"):
                p.copy_(0.5 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.08 * torch.randn(p.shape, generator=g))
        for blk in model.transformer.h:
            d = blk.attn.c_attn.weight.shape[0]
            blk.attn.c_attn.weight[:, :2 * d] *= QK_SHARPEN
            blk.attn.c_attn.bias[:2 * d] *= QK_SHARPEN


def batch(ids_list, pad):
    T = max(len(x) for x in ids_list)
    ids = [[pad] * (T - len(x)) + x for x in ids_list]
    mask = [[0] * (T - len(x)) + [1] * len(x) for x in ids_list]
    pos = [[max(sum(m[:t + 1]) - 1, 0) if m[t] else 1 for t in range(T)] for m in mask]
    return ids, mask, pos


def forward(model, ids, mask, pos):
    with torch.no_grad():
        return model(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask),
                     position_ids=torch.tensor(pos)).logits


def valid(logits, mask):
    """The logits of the real (unpadded) positions, as rows."""
    m = torch.tensor(mask).bool()
    return logits[m]


def greedy_loop(model, ids_list, n, eos):
    """The greedy tokens by full recomputation each step (one sequence at a time)."""
    out = []
    for x in ids_list:
        seq, new = list(x), []
        for _ in range(n):
            lg = forward(model, [seq], [[1] * len(seq)], [list(range(len(seq)))])[0, -1]
            t = int(torch.argmax(lg))
            new.append(t)
            seq.append(t)
            if t == eos:
                break
        out.append(new)
    return out


def checks(name, model, cfg, ids_list, ids, mask, pos, logits):
    V = logits.shape[-1]
    want = valid(logits, mask)
    # another head count: same weights, other split of the width
    other = GPT2Config(**{**cfg.to_dict(), "n_head": cfg.n_head * 2})
    slipped = GPT2LMHeadModel(other).eval()
    slipped.load_state_dict(model.state_dict())
    goldenlib.check_slip(name, want, valid(forward(slipped, ids, mask, pos), mask),
                         "twice the heads", 1e-2)
    # causal: appending a token leaves every earlier logit as it was
    x = ids_list[0]
    a = forward(model, [x], [[1] * len(x)], [list(range(len(x)))])[0]
    b = forward(model, [x + [7]], [[1] * (len(x) + 1)], [list(range(len(x) + 1))])[0]
    assert torch.allclose(a, b[:-1], atol=1e-5), f"{name}: a later token changed a logit"
    # ... and the causal mask matters: the first position attending to the whole prompt
    with torch.no_grad():
        h = model.transformer.wte(torch.tensor([x])) + model.transformer.wpe(
            torch.arange(len(x))[None])
        full = torch.nn.functional.scaled_dot_product_attention
        blk = model.transformer.h[0]
        qkv = blk.attn.c_attn(blk.ln_1(h))
        D = cfg.n_embd
        q, k, v = (t.view(1, len(x), cfg.n_head, -1).transpose(1, 2) for t in qkv.split(D, 2))
        causal = full(q, k, v, is_causal=True)
        bidir = full(q, k, v)
        moved = float((causal - bidir)[:, :, 0].abs().max() / causal.abs().max())
    print(f"  {name}: without the causal mask position 0's attention output moves by "
          f"{moved:.3g}")
    assert moved > 0.05, name
    print(f"  {name}: vocab {V}, logits max |{float(logits.abs().max()):.3g}|, input share "
          f"{goldenlib.input_share(want):.2f}")


def make(name, spec, tok_json):
    out = os.path.join(OUT, name)
    os.makedirs(out, exist_ok=True)
    fast = GPT2TokenizerFast(tokenizer_object=Tokenizer.from_str(tok_json))
    eos = fast.convert_tokens_to_ids("<|endoftext|>")
    cfg = GPT2Config(vocab_size=len(fast), n_positions=spec["n_positions"], n_embd=spec["n_embd"],
                     n_layer=spec["n_layer"], n_head=spec["n_head"], bos_token_id=eos,
                     eos_token_id=eos, activation_function="gelu_new")
    torch.manual_seed(spec["seed"])
    model = GPT2LMHeadModel(cfg).eval()
    randomise(model, spec["seed"])
    ids_list = [fast(p)["input_ids"] for p in PROMPTS]
    ids, mask, pos = batch(ids_list, eos)
    logits = forward(model, ids, mask, pos)
    checks(name, model, cfg, ids_list, ids, mask, pos, logits)
    with torch.no_grad():
        gen = model.generate(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask),
                             max_new_tokens=MAX_NEW, do_sample=False, pad_token_id=eos,
                             eos_token_id=eos)
    T = len(ids[0])
    greedy = []
    for row in gen[:, T:].tolist():
        cut = row.index(eos) + 1 if eos in row else len(row)
        greedy.append(row[:cut])
    assert all(len(g) >= MAX_NEW for g in greedy), f"{name}: eos before {MAX_NEW} tokens"
    loop = greedy_loop(model, ids_list, MAX_NEW, eos)
    assert loop == greedy, f"{name}: generate differs from the greedy loop"
    print(f"  {name}: greedy {MAX_NEW} tokens equal to the loop of full recomputations")
    if spec["json"]:
        with open(os.path.join(out, "tokenizer.json"), "w") as f:
            f.write(tok_json)
        sd = {k[len("transformer."):]: v.contiguous() for k, v in model.state_dict().items()
              if k.startswith("transformer.")}
        for i in range(cfg.n_layer):  # the causal buffer older hub files carry
            sd[f"h.{i}.attn.bias"] = torch.tril(torch.ones(cfg.n_positions, cfg.n_positions))[
                None, None]
        from safetensors.torch import save_file
        save_file(sd, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
        cfg.to_json_file(os.path.join(out, "config.json"))
    else:
        Tokenizer.from_str(tok_json).model.save(out)  # vocab.json, merges.txt
        model.save_pretrained(out)
    goldenlib.sort_metadata(os.path.join(out, "model.safetensors"))
    logits.numpy().astype("<f4").tofile(os.path.join(out, "logits.bin"))
    with open(os.path.join(out, "golden.json"), "w") as f:
        json.dump({"prompts": PROMPTS, "prompt_ids": ids_list, "ids": ids, "mask": mask,
                   "position_ids": pos, "vocab": cfg.vocab_size, "eos": eos,
                   "heads": cfg.n_head, "max_new": MAX_NEW, "greedy": greedy}, f)
    print(f"{name}: {out}")


def main():
    tok = train_bpe(corpus())
    for name, spec in CASES.items():
        make(name, spec, tok.to_str())
    return 0


if __name__ == "__main__":
    sys.exit(main())
