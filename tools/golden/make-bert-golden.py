#!/usr/bin/env python3
"""Makes the BERT golden folders in tests/data/: tiny random BertForMaskedLM, DistilBertForMaskedLM,
RobertaForMaskedLM and a headless BertModel from transformers, each saved as save_pretrained
writes it (model.safetensors + config.json, the tied decoder left out) with a vocab.txt, and the
outputs of one padded batch.

Sensitive (tools/golden/goldenlib.py): the query and key projections are scaled by QK_SHARPEN so that
the softmax rows peak as a trained model's do, and each case checks that the same weights run
with another head count move the input-dependent part of the output (row r - row 0, row 0 a
constant input) by far more than tests/test_bert.c allows. The batch holds a constant row, a
right-padded row, a left-padded row (with a second segment of token type 1 where the model has
token types) and a full row, so padding masks on both sides and position ids are exercised.

Per case <name>, folder tests/data/bert-<name>/: model.safetensors, config.json, vocab.txt,
golden.json ({"ids": [[...]], "mask": [[...]], "types": [[...]], "hidden": D, "vocab": V,
"heads": h, "mlm": bool, "fill_mask": {...}, "embed": {...}}), golden-hidden.bin [B, S, D] and
(MLM cases) golden-logits.bin [B, S, V], raw little-endian float32.
fill_mask: transformers' fill-mask answer (top 5 tokens and probabilities) for one sentence,
embed: sentence-transformers' mean pooling (and the [CLS] vector) of two texts, both through
BertTokenizer on the folder's vocab.txt: what `pagoda fill-mask` and `pagoda embed-text` must
print.

Needs torch, transformers 5.x and safetensors (tools/setup; .deps-torch/bin/python here).
"""
import json
import os
import shutil

import numpy as np
import torch

import goldenlib

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "data")
QK_SHARPEN = 3.0
QK = goldenlib.named_qk("attention.self.query.", "attention.self.key.", "attention.q_lin.",
                        "attention.k_lin.")
WORDS = ("the of and a to in is was he for it with as his on be at by i this had not are but "
         "from or have an they which one you were her all she there would their we him been has "
         "when who will more no if out so said what up its about into than them can only other "
         "new some could time these two may then do first any my now such like our over man me "
         "even most made after also did many before must through back years where much your way "
         "well down should because each just those people how too little state good very make "
         "world still own see men work long get here between both life being under never day "
         "same another know while last might us great old year off come since against go came "
         "right used take three paris france capital city london england river country").split()
PUNCT = list(".,;:!?'\"()-")
LETTERS = list("abcdefghijklmnopqrstuvwxyz0123456789")
SEQ = 12
FILL_TEXT = "Paris is the [MASK] of France."
EMBED_TEXTS = ["The river runs through the old city.", "Paris is a city in France"]


def vocab(roberta):
    """specials, words, punctuation, letters and ## letters: every lower-case ASCII text
    tokenizes. RoBERTa's order puts its pad token at id 1 (<s> <pad> </s> <unk>)."""
    head = (["<s>", "[PAD]", "</s>", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] if roberta
            else ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    letters = [c for c in LETTERS if c not in WORDS]  # "a" and "i" are words already
    return head + WORDS + PUNCT + letters + ["##" + c for c in LETTERS]


def randomise(model, seed):
    """Every parameter random (LayerNorm scales near 1), then q and k sharpened."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1 and "norm" in name.lower() and name.endswith("weight"):
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
            elif "embeddings" in name:
                p.copy_(0.5 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.2 * torch.randn(p.shape, generator=g))
    goldenlib.sharpen(model, QK_SHARPEN, QK)


def batch(V, pad, first, types, seed):
    """[4, SEQ] ids, mask, types: constant, right-padded, left-padded, full. Ids avoid the
    special tokens (first: the first ordinary id)."""
    g = np.random.default_rng(seed)
    ids = g.integers(first, V, size=(4, SEQ))
    mask = np.ones((4, SEQ), dtype=np.int64)
    ids[0, :] = first + 3
    mask[1, 7:] = 0
    mask[2, :4] = 0
    ids[mask == 0] = pad
    tt = np.zeros((4, SEQ), dtype=np.int64)
    if types:
        tt[2, 8:] = 1
        tt[3, 6:] = 1
    return ids, mask, tt


def run(model, ids, mask, tt, types):
    with torch.no_grad():
        kw = dict(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask))
        if types:
            kw["token_type_ids"] = torch.tensor(tt)
        out = model(**kw, output_hidden_states=True)
    hidden = out.hidden_states[-1] if hasattr(out, "hidden_states") and out.hidden_states \
        else out.last_hidden_state
    logits = out.logits if hasattr(out, "logits") else None
    return hidden, logits


def fill_mask(model, tok):
    enc = tok(FILL_TEXT, return_tensors="pt")
    with torch.no_grad():
        logits = model(**enc).logits[0]
    pos = int((enc["input_ids"][0] == tok.mask_token_id).nonzero()[0])
    p = torch.softmax(logits[pos].double(), -1)
    top = torch.topk(p, 5)
    return {"text": FILL_TEXT, "ids": enc["input_ids"][0].tolist(), "position": pos,
            "top": [[tok.convert_ids_to_tokens(int(i)), int(i), float(v)]
                    for v, i in zip(top.values, top.indices)]}


def embed(model, tok):
    enc = tok(EMBED_TEXTS, return_tensors="pt", padding=True)
    with torch.no_grad():
        base = getattr(model, "base_model", model)
        h = base(**enc).last_hidden_state
    m = enc["attention_mask"].unsqueeze(-1).float()
    mean = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)  # sentence-transformers' Pooling(mean)
    return {"texts": EMBED_TEXTS, "mean": mean.tolist(), "cls": h[:, 0].tolist()}


def save_case(name, make, heads, seed, arch):
    from transformers import BertTokenizer
    model = make(heads).eval()
    randomise(model, seed)
    cfg = model.config
    V = cfg.vocab_size
    roberta = arch == "roberta"
    pad = cfg.pad_token_id
    types = arch != "distilbert"
    ids, mask, tt = batch(V, pad, 7 if roberta else 5, types and cfg.type_vocab_size > 1, seed + 1)
    hidden, logits = run(model, ids, mask, tt, types)
    want = logits if logits is not None else hidden
    for wrong in {1, 2, 4, 8} - {heads}:
        other = make(wrong).eval()
        other.load_state_dict(model.state_dict())
        goldenlib.check_slip(name, want, run(other, ids, mask, tt, types)[1 if logits is not None
                                                                        else 0],
                             f"{wrong} heads for {heads}", 0.05)
    d = os.path.join(OUT, f"bert-{name}")
    shutil.rmtree(d, ignore_errors=True)
    model.save_pretrained(d)
    if not roberta:  # RoBERTa's own tokenizer is byte-level BPE: its golden takes ids only
        with open(os.path.join(d, "vocab.txt"), "w") as f:
            f.write("\n".join(vocab(roberta)) + "\n")
    if name == "tiny":  # the other folders leave do_lower_case to BertTokenizer's default
        with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
            json.dump({"do_lower_case": True, "tokenizer_class": "BertTokenizer"}, f)
    if os.path.exists(os.path.join(d, "generation_config.json")):
        os.remove(os.path.join(d, "generation_config.json"))
    meta = {"ids": ids.tolist(), "mask": mask.tolist(), "types": tt.tolist(),
            "hidden": int(hidden.shape[-1]), "vocab": V, "heads": heads,
            "mlm": logits is not None, "arch": arch}
    if not roberta:
        tok = BertTokenizer(os.path.join(d, "vocab.txt"), do_lower_case=True)
        if name == "distil":  # a tokenizer.json too, which the loaders prefer to vocab.txt
            tok.backend_tokenizer.save(os.path.join(d, "tokenizer.json")) \
                if hasattr(tok, "backend_tokenizer") else None
        if logits is not None:
            meta["fill_mask"] = fill_mask(model, tok)
        meta["embed"] = embed(model, tok)
    with open(os.path.join(d, "golden.json"), "w") as f:
        json.dump(meta, f, indent=1)
    hidden.numpy().astype("<f4").tofile(os.path.join(d, "golden-hidden.bin"))
    if logits is not None:
        logits.numpy().astype("<f4").tofile(os.path.join(d, "golden-logits.bin"))
    print(name, "hidden", tuple(hidden.shape), "logits",
          None if logits is None else tuple(logits.shape),
          "input share", f"{goldenlib.input_share(want):.2f}")


def main():
    from transformers import (BertConfig, BertForMaskedLM, BertModel, DistilBertConfig,
                              DistilBertForMaskedLM, RobertaConfig, RobertaForMaskedLM)
    torch.manual_seed(0)
    nv, nr = len(vocab(False)), len(vocab(True))

    def bert(h):
        return BertForMaskedLM(BertConfig(
            vocab_size=nv, hidden_size=48, num_hidden_layers=2, num_attention_heads=h,
            intermediate_size=96, max_position_embeddings=32, hidden_act="gelu",
            layer_norm_eps=1e-12))

    def bert_model(h):
        return BertModel(BertConfig(
            vocab_size=nv, hidden_size=32, num_hidden_layers=2, num_attention_heads=h,
            intermediate_size=64, max_position_embeddings=24, hidden_act="gelu_new",
            layer_norm_eps=1e-6, type_vocab_size=3))

    def distil(h):
        return DistilBertForMaskedLM(DistilBertConfig(
            vocab_size=nv, dim=32, n_layers=2, n_heads=h, hidden_dim=80,
            max_position_embeddings=20))

    def roberta(h):
        return RobertaForMaskedLM(RobertaConfig(
            vocab_size=nr, hidden_size=64, num_hidden_layers=2, num_attention_heads=h,
            intermediate_size=128, max_position_embeddings=SEQ + 2 + 4, hidden_act="gelu_new",
            layer_norm_eps=1e-5, pad_token_id=1, bos_token_id=0, eos_token_id=2,
            type_vocab_size=1))

    save_case("tiny", bert, 4, 10, "bert")
    save_case("model", bert_model, 2, 20, "bert")
    save_case("distil", distil, 2, 30, "distilbert")
    save_case("roberta", roberta, 4, 40, "roberta")


if __name__ == "__main__":
    main()
