"""pagoda.load on the BERT-family golden folders of tests/data (tools/golden/make-bert-golden.py)
against transformers' outputs on every device; the tokenizers; fill_mask and embed against the
goldens; errors raise."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import pagoda
from conftest import DATA, slow_device

CASES = ["tiny", "model", "distil", "roberta"]


def golden(name):
    d = os.path.join(DATA, f"bert-{name}")
    g = json.load(open(os.path.join(d, "golden.json")))
    B, S = len(g["ids"]), len(g["ids"][0])
    hidden = np.fromfile(os.path.join(d, "golden-hidden.bin"), np.float32).reshape(B, S, -1)
    logits = (np.fromfile(os.path.join(d, "golden-logits.bin"), np.float32).reshape(B, S, -1)
              if g["mlm"] else None)
    return d, g, hidden, logits


def close(got, want, rtol=1e-4):
    scale = float(np.abs(want).max())
    return np.allclose(got, want, rtol=rtol, atol=rtol * scale)


@pytest.mark.parametrize("name", CASES)
def test_bert_golden(ctx, name):
    if slow_device(ctx) and name not in ("tiny", "roberta"):
        pytest.skip("software rasteriser: covered by the C suite")
    d, g, hidden, logits = golden(name)
    m = pagoda.load(d, ctx)
    assert isinstance(m, pagoda.Bert) and m.heads == g["heads"] and m.mlm == g["mlm"]
    types = None if g["arch"] == "distilbert" else g["types"]
    out = m(g["ids"], g["mask"], types, attentions=True)
    assert close(out["hidden"], hidden)
    if logits is not None:
        assert close(out["logits"], logits)
    a = out["attentions"]
    assert a.shape == (m.layers, len(g["ids"]), m.heads, len(g["ids"][0]), len(g["ids"][0]))
    assert np.allclose(a.sum(-1), 1, atol=1e-4)
    m.close()


def test_fill_mask_and_embed(any_ctx):
    d, g, _, _ = golden("tiny")
    m = pagoda.load(os.path.join(d, "model.safetensors"), any_ctx)
    cands = m.fill_mask(g["fill_mask"]["text"], top_k=5)
    assert [c["id"] for c in cands[0]] == [t[1] for t in g["fill_mask"]["top"]]
    assert np.allclose([c["probability"] for c in cands[0]],
                       [t[2] for t in g["fill_mask"]["top"]], rtol=1e-4)
    d, g, _, _ = golden("model")
    m = pagoda.load(d, any_ctx)
    for pooling in ("mean", "cls"):
        e = m.embed(g["embed"]["texts"], pooling=pooling)
        assert close(e, np.array(g["embed"][pooling], np.float32))
    e = m.embed(["a river", "a city"], normalize=True)
    assert np.allclose(np.linalg.norm(e, axis=1), 1, atol=1e-5)
    with pytest.raises(pagoda.UnsupportedError):
        m.fill_mask("a [MASK]")


def test_tokenizer():
    d, g, _, _ = golden("tiny")
    t = pagoda.Tokenizer.beside(d)
    assert t.encode(g["fill_mask"]["text"]) == g["fill_mask"]["ids"]
    assert t.decode(t.encode("Paris is the capital.")) == "paris is the capital."
    assert t.token(t.id("[MASK]")) == "[MASK]" and t.vocab_size == 242
    with pytest.raises(pagoda.InvalidArgumentError, match="byte offset|offset"):
        t.encode("ok \udcff")


def test_errors(any_ctx, tmp_path):
    d, g, _, _ = golden("tiny")
    for f in ("model.safetensors", "vocab.txt"):
        os.symlink(os.path.join(d, f), tmp_path / f)
    cfg = json.load(open(os.path.join(d, "config.json")))
    cfg["num_attention_heads"] = 5
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(pagoda.FormatError, match="5 does not divide the width 48"):
        pagoda.load(tmp_path, any_ctx)
    m = pagoda.load(d, any_ctx)
    with pytest.raises(pagoda.InvalidArgumentError, match="outside the vocabulary"):
        m([[2, 10000, 3]])
    with pytest.raises(pagoda.InvalidArgumentError, match="no mask token"):
        m.fill_mask("no mask here")
