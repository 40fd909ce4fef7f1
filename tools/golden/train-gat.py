#!/usr/bin/env python3
"""Trains a 2-layer graph attention network with PyTorch Geometric and exports it for `pagoda gat`.

Python: PyTorch 2.x, torch_geometric (2.3 or later), safetensors and numpy. The peers' venv has
them all (tools/bench/bench-peers sets it up):
    .deps/peers-venv/bin/python tools/golden/train-gat.py --out /tmp/gat
or make one: python3 -m venv /tmp/venv && /tmp/venv/bin/pip install torch torch_geometric
safetensors numpy.

The graph is generated, seeded: a stochastic block model (--classes blocks of about equal size,
edge probability --p-in inside a block, --p-out between blocks; undirected, so each edge is
stored both ways, as PyG's stochastic_blockmodel_graph does) whose nodes carry class-dependent
features (a random class centre per class plus Gaussian noise of --noise). 20 % of the nodes
train, 20 % validate, 60 % test. The model is the GAT of Veličković et al. for Cora: GATConv(F, 8,
heads=8) -> ELU -> GATConv(64, classes, heads=1, concat=False), dropout 0.6, Adam (lr 0.005,
weight decay 5e-4), --epochs epochs; the weights of the best validation epoch are kept.

Writes into --out:
    model.safetensors   the state dict as PyG names it (conv1.lin.weight, or lin_src/lin_dst
                        with older PyG; conv1.att_src [1, H, C], conv1.att_dst, conv1.bias, ...)
                        with __metadata__: gat.layers "conv1,conv2", gat.activation "elu",
                        <layer>.heads, <layer>.concat ("true"/"false"), <layer>.negative_slope,
                        <layer>.add_self_loops ("true"/"false")
    graph.safetensors   x [N, F] F32, edge_index [2, E] I64, y [N] I64, test_mask [N] BOOL
    expected.safetensors  PyG's eval-mode output: logits [N, classes] F32 (conv2's output, before
                        any softmax), pred [N] I64, alpha [E', 1] F32 (conv2's attention
                        coefficients, in the order of the edge_index GATConv returns)
    pyg.json            accuracy on test_mask, sizes, PyG and PyTorch versions

--golden writes the small version tests/data/gat-{model,graph,expected}.safetensors (240 nodes)
read by tests/test_gat.c; it checks that no test node's top two logits are within 1e-3 of each
other, so that float rounding cannot flip a prediction. It also writes
tests/data/gat-layers.safetensors: single GATConv layers with random weights on small random
graphs in the settings a trained model does not cover (heads averaged, no self loops with
isolated nodes, self loops and multi-edges in the input, residual, lin_src/lin_dst from a
(x, x) pair, another slope, N = 1, E = 0), with PyG's outputs and attention coefficients:
case<k>.{x, edge_index, lin.weight | lin_src.weight + lin_dst.weight, att_src, att_dst, bias,
res.weight, out, alpha}; __metadata__ "cases" and case<k>.{heads, channels, concat,
add_self_loops, negative_slope}.
"""
import argparse
import json
import os
import time

import numpy as np
import torch
import torch.nn.functional as F
import torch_geometric
from safetensors.torch import save_file
from torch_geometric.nn import GATConv
from torch_geometric.utils import stochastic_blockmodel_graph

import goldenlib

DATA = goldenlib.DATA


class GAT(torch.nn.Module):
    def __init__(self, f, classes, hidden=8, heads=8, dropout=0.6):
        super().__init__()
        self.dropout = dropout
        self.conv1 = GATConv(f, hidden, heads=heads, dropout=dropout)
        self.conv2 = GATConv(hidden * heads, classes, heads=1, concat=False, dropout=dropout)

    def forward(self, x, edge_index, attention=False):
        x = F.dropout(x, p=self.dropout, training=self.training)
        x = F.elu(self.conv1(x, edge_index))
        x = F.dropout(x, p=self.dropout, training=self.training)
        if attention:
            return self.conv2(x, edge_index, return_attention_weights=True)
        return self.conv2(x, edge_index)


def make_graph(n, classes, feats, p_in, p_out, noise, gen):
    sizes = [n // classes + (1 if i < n % classes else 0) for i in range(classes)]
    probs = torch.full((classes, classes), p_out)
    probs.fill_diagonal_(p_in)
    torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=gen)))
    edge_index = stochastic_blockmodel_graph(sizes, probs, directed=False)
    y = torch.cat([torch.full((s,), c, dtype=torch.long) for c, s in enumerate(sizes)])
    # Shuffle node ids so that classes are not contiguous ranges.
    perm = torch.randperm(n, generator=gen)
    inv = torch.empty_like(perm)
    inv[perm] = torch.arange(n)
    edge_index = inv[edge_index]
    y = y[perm]
    centres = torch.randn(classes, feats, generator=gen)
    x = centres[y] + noise * torch.randn(n, feats, generator=gen)
    order = torch.randperm(n, generator=gen)
    train = torch.zeros(n, dtype=torch.bool)
    val = torch.zeros(n, dtype=torch.bool)
    test = torch.zeros(n, dtype=torch.bool)
    train[order[: n // 5]] = True
    val[order[n // 5: 2 * n // 5]] = True
    test[order[2 * n // 5:]] = True
    return x.float(), edge_index, y, train, val, test


def train(model, x, ei, y, train_m, val_m, epochs, log):
    opt = torch.optim.Adam(model.parameters(), lr=0.005, weight_decay=5e-4)
    best, best_state = -1.0, None
    for epoch in range(epochs):
        model.train()
        opt.zero_grad()
        loss = F.cross_entropy(model(x, ei)[train_m], y[train_m])
        loss.backward()
        opt.step()
        model.eval()
        with torch.no_grad():
            pred = model(x, ei).argmax(1)
        acc = (pred[val_m] == y[val_m]).float().mean().item()
        if acc >= best:
            best = acc
            best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        if log and (epoch % 20 == 0 or epoch == epochs - 1):
            print(f"epoch {epoch:4d}  loss {loss.item():.4f}  val acc {acc:.4f}")
    model.load_state_dict(best_state)
    return best


def export(model, x, ei, y, test_m, out_dir, prefix, log):
    os.makedirs(out_dir, exist_ok=True)
    model.eval()
    with torch.no_grad():
        logits, (ei2, alpha) = model(x, ei, attention=True)
    pred = logits.argmax(1)
    acc = (pred[test_m] == y[test_m]).float().mean().item()
    # Shared tensors (lin_src is lin_dst in some PyG versions) must be separate for safetensors.
    state = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    meta = {"gat.layers": "conv1,conv2", "gat.activation": "elu",
            "format": "pyg-gat", "torch_geometric": torch_geometric.__version__}
    for name in ("conv1", "conv2"):
        conv = getattr(model, name)
        meta[f"{name}.heads"] = str(conv.heads)
        meta[f"{name}.concat"] = "true" if conv.concat else "false"
        meta[f"{name}.negative_slope"] = repr(float(conv.negative_slope))
        meta[f"{name}.add_self_loops"] = "true" if conv.add_self_loops else "false"
    save_file(state, os.path.join(out_dir, prefix + "model.safetensors"), metadata=meta)
    save_file({"x": x.contiguous(), "edge_index": ei.contiguous(), "y": y.contiguous(),
               "test_mask": test_m.contiguous()},
              os.path.join(out_dir, prefix + "graph.safetensors"))
    save_file({"logits": logits.contiguous(), "pred": pred.contiguous(),
               "alpha": alpha.contiguous()},
              os.path.join(out_dir, prefix + "expected.safetensors"))
    top2 = logits[test_m].topk(2, dim=1).values
    margin = (top2[:, 0] - top2[:, 1]).min().item()
    info = {"nodes": x.shape[0], "features": x.shape[1], "edges": ei.shape[1],
            "edges_with_self_loops": ei2.shape[1], "classes": logits.shape[1],
            "test_nodes": int(test_m.sum()), "accuracy": acc, "min_top2_margin": margin,
            "torch": torch.__version__, "torch_geometric": torch_geometric.__version__}
    if not prefix:
        np.save(os.path.join(out_dir, "pyg-logits.npy"), logits.numpy())
        with open(os.path.join(out_dir, "pyg.json"), "w") as f:
            json.dump(info, f, indent=1)
    if log:
        print(json.dumps(info))
    return info


LAYER_CASES = [
    # heads, channels, concat, self loops, slope, residual, lin_src/lin_dst, bias, nodes, edges
    dict(heads=4, ch=3, concat=True, loops=True, slope=0.2, res=False, pair=False, bias=True,
         n=30, e=90),
    dict(heads=3, ch=5, concat=False, loops=False, slope=0.2, res=False, pair=False, bias=True,
         n=40, e=50),
    dict(heads=2, ch=4, concat=True, loops=True, slope=0.1, res=True, pair=False, bias=True,
         n=25, e=70),
    dict(heads=2, ch=6, concat=False, loops=True, slope=0.3, res=True, pair=True, bias=True,
         n=20, e=60),
    dict(heads=2, ch=3, concat=True, loops=True, slope=0.2, res=False, pair=False, bias=True,
         n=1, e=1),
    dict(heads=3, ch=2, concat=True, loops=True, slope=0.2, res=False, pair=False, bias=False,
         n=5, e=0),
    dict(heads=8, ch=8, concat=True, loops=False, slope=0.2, res=False, pair=False, bias=True,
         n=60, e=400),
]


def layer_cases(path, gen):
    """Single GATConv layers on small random graphs (see the module docstring)."""
    tensors, meta = {}, {"cases": str(len(LAYER_CASES))}
    for k, c in enumerate(LAYER_CASES):
        f = 7
        n, e = c["n"], c["e"]
        src = torch.randint(0, n, (e,), generator=gen)
        # Edges only into the first 3/4 of the nodes: the rest are isolated without self loops.
        dst = torch.randint(0, max(1, (3 * n) // 4), (e,), generator=gen)
        if e >= 10:
            dst[:3] = src[:3]                       # self loops in the input
            src[5:8], dst[5:8] = src[4], dst[4]     # a multi-edge, four times
        ei = torch.stack([src, dst]).long()
        x = torch.randn(n, f, generator=gen)
        conv = GATConv((f, f) if c["pair"] else f, c["ch"], heads=c["heads"], concat=c["concat"],
                       add_self_loops=c["loops"], negative_slope=c["slope"],
                       residual=c["res"], bias=c["bias"]).eval()
        with torch.no_grad():
            for p in conv.parameters():
                p.copy_(torch.randn(p.shape, generator=gen) * 0.6)
            out, (ei2, alpha) = conv((x, x) if c["pair"] else x, ei,
                                     return_attention_weights=True)
        pre = f"case{k}"
        tensors[f"{pre}.x"] = x
        tensors[f"{pre}.edge_index"] = ei
        for name, t in conv.state_dict().items():
            tensors[f"{pre}.{name}"] = t.detach().clone().contiguous()
        tensors[f"{pre}.out"] = out.contiguous()
        tensors[f"{pre}.alpha"] = alpha.contiguous()
        meta.update({f"{pre}.heads": str(c["heads"]), f"{pre}.channels": str(c["ch"]),
                     f"{pre}.concat": "true" if c["concat"] else "false",
                     f"{pre}.add_self_loops": "true" if c["loops"] else "false",
                     f"{pre}.negative_slope": repr(c["slope"])})
    save_file(tensors, path, metadata=meta)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="gat-out", help="output folder (default gat-out)")
    ap.add_argument("--nodes", type=int, default=3000)
    ap.add_argument("--classes", type=int, default=5)
    ap.add_argument("--features", type=int, default=32)
    ap.add_argument("--p-in", type=float, default=None, help="default: 8 / block size")
    ap.add_argument("--p-out", type=float, default=None, help="default: 3 / N")
    ap.add_argument("--noise", type=float, default=2.0)
    ap.add_argument("--epochs", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--golden", action="store_true",
                    help="write the small test version into tests/data instead")
    a = ap.parse_args()
    if a.golden:
        a.nodes, a.epochs, a.out = 240, 200, DATA
    torch.manual_seed(a.seed)
    torch.use_deterministic_algorithms(True)
    gen = torch.Generator().manual_seed(a.seed)
    p_in = a.p_in if a.p_in is not None else 8.0 / (a.nodes / a.classes)
    p_out = a.p_out if a.p_out is not None else 3.0 / a.nodes
    x, ei, y, tr, va, te = make_graph(a.nodes, a.classes, a.features, p_in, p_out, a.noise, gen)
    model = GAT(a.features, a.classes)
    t0 = time.time()
    best = train(model, x, ei, y, tr, va, a.epochs, not a.golden)
    if not a.golden:
        print(f"trained {a.epochs} epochs in {time.time() - t0:.1f} s; best val acc {best:.4f}")
    info = export(model, x, ei, y, te, a.out, "gat-" if a.golden else "", True)
    if a.golden:
        layer_cases(os.path.join(DATA, "gat-layers.safetensors"),
                    torch.Generator().manual_seed(a.seed + 1))
    if a.golden and info["min_top2_margin"] < 1e-3:
        raise SystemExit(f"a test node's top two logits are {info['min_top2_margin']:.2e} apart: "
                         "pick another --seed")


if __name__ == "__main__":
    main()
