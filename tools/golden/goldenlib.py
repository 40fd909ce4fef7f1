"""Helpers the golden scripts share (tools/golden/make-*-golden.py import it from beside them).

A random model answers mostly from its biases, and its attention is nearly uniform: a DETR run
with the wrong head count differed from transformers by only 6e-6 relative on such a model. The
goldens are made *sensitive*: query and key projections scaled up until each softmax is as
peaked as a trained model's (sharpen), and every script says how much of its output the input
decides (input_share) and checks, at generation time, that a slip such as a wrong head count
moves the input-dependent part of the output far beyond the tests' tolerance (diff_error: the
same measure as pgd_test_diff_error in tests/harness.c).
"""
import json
import os

import numpy as np

# The golden data folder, tests/data: where every maker writes.
DATA = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                     "tests", "data"))


def out(name):
    """The path of `name` under DATA, its folder made if missing."""
    path = os.path.join(DATA, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return path


def write_f32(name, x):
    """Writes x (a torch tensor or an array) under DATA as raw little-endian float32, C order:
    the .bin files pgd_test_read_floats reads."""
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    np.asarray(x).astype("<f4").tofile(out(name))


def write_json(name, doc, **dump):
    """Writes doc under DATA as JSON (json.dump's keyword arguments in dump)."""
    with open(out(name), "w") as f:
        json.dump(doc, f, **dump)


def sharpen(model, factor, query_key):
    """Multiplies the query and key projections (weights and biases) by factor: the attention
    logits grow by factor², the softmax peaks as a trained model's does. query_key(name, p)
    returns the rows of p to scale (a slice; slice(None) for all), or None to leave p."""
    import torch  # the image makers use this module without PyTorch
    with torch.no_grad():
        for name, p in model.named_parameters():
            rows = query_key(name, p)
            if rows is not None:
                p[rows] *= factor


def fused_qk(*suffixes):
    """query_key for fused [3*D, ...] q/k/v tensors named ...<suffix> (q and k: the first 2/3)."""
    def pick(name, p):
        if name.endswith(suffixes):
            return slice(0, p.shape[0] * 2 // 3)
        return None
    return pick


def named_qk(*parts):
    """query_key for separate query and key tensors whose names contain one of parts."""
    def pick(name, p):
        return slice(None) if any(s in name for s in parts) else None
    return pick


def rows(t):
    t = t.detach().double().cpu().numpy()
    return t.reshape(t.shape[0], -1)


def input_share(want):
    """The largest |row r - row 0| over the largest |value|: how much the input decides."""
    w = rows(want)
    return float(np.abs(w[1:] - w[:1]).max() / np.abs(w).max())


def diff_error(got, want):
    """The largest error of (row r - row 0) of got against the same of want, over the largest
    |row r - row 0| of want."""
    g, w = rows(got), rows(want)
    dw, dg = w[1:] - w[:1], g[1:] - g[:1]
    return float(np.abs(dg - dw).max() / np.abs(dw).max())


def attention_peak(probs):
    """The mean of each softmax row's largest probability (1/N: uniform; 1: one-hot)."""
    return float(probs.max(-1).values.mean())


def check_slip(name, want, slipped, what, at_least):
    """Says how far a slip (what) moves the output and its input-dependent part, and refuses a
    golden that cannot see it (the difference moved by less than at_least)."""
    d = diff_error(slipped, want)
    full = float((rows(slipped) - rows(want)).__abs__().max() / np.abs(rows(want)).max())
    print(f"  {name}: {what} moves the output by {full:.3g} and rows minus row 0 by {d:.3g} "
          f"(input share {input_share(want):.2f})")
    assert d >= at_least, f"{name}: {what} hides ({d:.3g} < {at_least})"
    return d


def sort_metadata(path):
    """Rewrites a safetensors file's header with its __metadata__ keys sorted: safetensors keeps
    the metadata in a hash map, so two runs write the same tensors under headers in different
    orders; sorted, a rerun writes the same bytes."""
    import struct
    with open(path, "rb") as f:
        blob = f.read()
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + n])
    if "__metadata__" in header:
        header["__metadata__"] = dict(sorted(header["__metadata__"].items()))
    text = json.dumps(header, separators=(",", ":")).encode()
    assert len(text) <= n, path
    text += b" " * (n - len(text))
    with open(path, "wb") as f:
        f.write(blob[:8] + text + blob[8 + n:])
