#!/usr/bin/env python3
"""Makes the DETR golden files in tests/data/: one tiny DetrForObjectDetection (transformers 5.x)
with a timm ResNet backbone (Bottleneck blocks, 1/1/1/2 per layer, widths 4/4/8/8, stem 8:
timm's resnet50 with layers/channels shrunk and the stem narrowed, its batch norms replaced by
DETR's frozen ones with random statistics), width 16, one encoder and two decoder layers (2 and 4 heads), 6
queries, 4 labels + "no object"; weights and statistics random and rounded to float16 (the
files store F16, so the C side reads exactly what PyTorch ran).

Input: a batch of two images padded to 96 x 64 (the first 96 x 30, the second 50 x 64, so the
3 x 2 feature grid of each has padded cells) with their pixel mask, pixel values from a formula
(((h*7 + w*13 + c*29 + b*31) % 17) / 8 - 1, exact in float32; tests/test_detr.c computes the
same); padding 0 as DetrImageProcessor pads.

Files (raw little-endian float32 .bin unless said):
  detr-hf4.safetensors       save_pretrained's file (transformers 5.x writes the 4.x names the
                             hub's checkpoints have: model.backbone.conv_encoder.model.*,
                             out_proj, fc1), as F16, heads in __metadata__
  detr-hf5.safetensors       state_dict() names of transformers 5.x (model.backbone.model.*,
                             o_proj, mlp.fc1)
  detr-original.safetensors  the same weights renamed to the original repository's names
                             (backbone.0.body.*, packed in_proj_weight/bias, linear1/2, norm1..3,
                             multihead_attn, class_embed, bbox_embed.layers.N, query_embed,
                             input_proj): the maths is the same
  detr-logits.bin [2, 6, 5], detr-boxes.bin [2, 6, 4], detr-cross.bin [2, 6, 6] (the last
  decoder layer's cross-attention, heads averaged), detr.json (sizes, threshold and
  post_process_object_detection's detections per image with target sizes (H, W) of each image)
  detr-dc5.safetensors, detr-dc5-logits.bin, detr-dc5-boxes.bin: the same model with
  DetrConfig(dilation=True) (timm's output_stride=16: layer4 dilated; "dilation": "true" in
  __metadata__) on the same batch (a 6 x 4 feature grid)
  detr-cli-input.npy [1, 3, 48, 64] float32 and detr-cli-mask.npy [1, 48, 64] uint8 (the
  image 48 x 40), detr-cli-logits.npy / detr-cli-boxes.npy (float32): for `pagoda detect
  --input ... --pixel-mask ...`

Sensitive (tools/golden/goldenlib.py): the query and key projections are doubled (the softmax peaks
as a trained model's does) and so are the cross-attention's value and output projections (more of
the logits depends on the image); the script checks that the same weights run with other head counts
(8/8, as Pagoda once assumed, 1/4, 2/2) move the logits' image-dependent part (image 1 - image 0) by
far more than tests/test_detr.c allows.

Needs PyTorch, timm, transformers 5.x and safetensors from pip (the files were made with torch
2.15, timm 1.0.31, transformers 5.25), e.g. the venv of tools/golden/make-vit-golden.py:
    .deps-torch/bin/python tools/golden/make-detr-golden.py
"""
import json
import os
import tempfile

import numpy as np
import timm
import torch
from safetensors.torch import load_file, save_file
from transformers import DetrConfig, DetrForObjectDetection
from transformers.models.detr.modeling_detr import replace_batch_norm

import goldenlib

OUT = goldenlib.DATA
D, FFN, ENC, DEC, ENC_HEADS, DEC_HEADS, QUERIES, LABELS = 16, 32, 1, 2, 2, 4, 6, 4
H, W = 96, 64
SIZES = [(96, 30), (50, 64)]


def pixels(b, h, w):
    c, y, x = np.meshgrid(np.arange(3), np.arange(h), np.arange(w), indexing="ij")
    return (((y * 7 + x * 13 + c * 29 + b * 31) % 17) / 8.0 - 1.0).astype(np.float32)


def batch(sizes, ph, pw):
    x = np.zeros((len(sizes), 3, ph, pw), np.float32)
    m = np.zeros((len(sizes), ph, pw), np.int64)
    for b, (h, w) in enumerate(sizes):
        x[b, :, :h, :w] = pixels(b, h, w)
        m[b, :h, :w] = 1
    return torch.from_numpy(x), torch.from_numpy(m)


def build(dc5=False):
    cfg = DetrConfig(use_timm_backbone=True, backbone="resnet50", dilation=dc5, d_model=D,
                     encoder_layers=ENC,
                     decoder_layers=DEC, encoder_ffn_dim=FFN, decoder_ffn_dim=FFN,
                     encoder_attention_heads=ENC_HEADS, decoder_attention_heads=DEC_HEADS,
                     num_queries=QUERIES, num_labels=LABELS, attn_implementation="eager")
    model = DetrForObjectDetection(cfg).eval()
    body = timm.create_model("resnet50", pretrained=False, features_only=True,
                             out_indices=(1, 2, 3, 4), layers=(1, 1, 1, 2),
                             channels=(4, 4, 8, 8), output_stride=16 if dc5 else 32)
    # (layer4 has two blocks: DC5 dilates the second's 3x3 convolution by 2, the first's by 1)
    # timm's plain stem is 64 wide whatever stem_width says: narrowed to 8 here
    body.conv1 = torch.nn.Conv2d(3, 8, 7, 2, 3, bias=False)
    body.bn1 = torch.nn.BatchNorm2d(8)
    blk = body.layer1[0]
    blk.conv1 = torch.nn.Conv2d(8, blk.conv1.out_channels, 1, bias=False)
    blk.downsample[0] = torch.nn.Conv2d(8, blk.downsample[0].out_channels, 1, bias=False)
    replace_batch_norm(body)
    enc = model.model.backbone
    enc.model = body
    enc.intermediate_channel_sizes = body.feature_info.channels()
    model.model.input_projection = torch.nn.Conv2d(enc.intermediate_channel_sizes[-1], D, 1)
    g = torch.Generator().manual_seed(18)
    with torch.no_grad():
        for name, t in list(model.named_parameters()) + list(model.named_buffers()):
            if name.endswith("running_var"):
                v = 0.5 + torch.rand(t.shape, generator=g)
            elif name.endswith("running_mean"):
                v = 0.1 * torch.randn(t.shape, generator=g)
            elif t.dim() == 1 and name.endswith("weight"):
                v = 1.0 + 0.2 * torch.randn(t.shape, generator=g)
            elif "query_position" in name:
                v = torch.randn(t.shape, generator=g)
            elif t.dim() == 1:
                v = 0.1 * torch.randn(t.shape, generator=g)
            else:
                fan_in = t[0].numel()
                v = torch.randn(t.shape, generator=g) * (1.5 / fan_in ** 0.5)
            # Sensitive (tools/golden/goldenlib.py): query and key projections doubled, so that
            # every softmax peaks as a trained model's does (largest probability 0.8 to 0.9 where
            # random weights give 0.6), and the cross-attention's value and output projections
            # doubled, so that more of the logits depends on the image; 2 keeps F16 exact.
            if ("q_proj" in name or "k_proj" in name or "encoder_attn.v_proj" in name
                    or "encoder_attn.o_proj" in name):
                v = 2 * v
            t.copy_(v.half().float())
    return model


def check_heads(model, x, m, want, dc5=False):
    """The same weights run with other head counts (the C side assumed 8 for every layer before
    it read the metadata) move the logits' image-dependent part (image 1 - image 0) far beyond
    tests/test_detr.c's tolerance."""
    global ENC_HEADS, DEC_HEADS
    right = ENC_HEADS, DEC_HEADS
    for enc, dec in ((8, 8), (1, 4), (2, 2)):
        ENC_HEADS, DEC_HEADS = enc, dec
        other = build(dc5)
        other.load_state_dict(model.state_dict())
        goldenlib.check_slip("detr" + ("-dc5" if dc5 else ""), want, run(other, x, m).logits,
                             f"{enc}/{dec} heads for {right[0]}/{right[1]}", 0.1)
    ENC_HEADS, DEC_HEADS = right


def run(model, x, m):
    with torch.no_grad():
        return model(pixel_values=x, pixel_mask=m, output_attentions=True)


def original_names(sd):
    out = {}
    for k, v in sd.items():
        if k.startswith("model.backbone.model."):
            out["backbone.0.body." + k[len("model.backbone.model."):]] = v
            continue
        k2 = (k.replace("model.input_projection", "input_proj")
              .replace("model.query_position_embeddings", "query_embed")
              .replace("model.encoder.layers.", "transformer.encoder.layers.")
              .replace("model.decoder.layers.", "transformer.decoder.layers.")
              .replace("model.decoder.layernorm", "transformer.decoder.norm")
              .replace("class_labels_classifier", "class_embed")
              .replace("bbox_predictor", "bbox_embed")
              .replace("encoder_attn.", "multihead_attn.")
              .replace("o_proj", "out_proj").replace("mlp.fc1", "linear1")
              .replace("mlp.fc2", "linear2"))
        dec = k2.startswith("transformer.decoder.layers.")
        k2 = (k2.replace("self_attn_layer_norm", "norm1")
              .replace("encoder_attn_layer_norm", "norm2")
              .replace("final_layer_norm", "norm3" if dec else "norm2"))
        out[k2] = v
    packed = {}
    for k in list(out):
        for part in ("weight", "bias"):
            if k.endswith(f"q_proj.{part}"):
                p = k[: -len(f"q_proj.{part}")]
                packed[p + f"in_proj_{part}"] = torch.cat(
                    [out.pop(p + f"{n}_proj.{part}") for n in "qkv"])
    out.update(packed)
    return out


def f16(sd):
    return {k: v.detach().contiguous().half() for k, v in sd.items()}


def main():
    model = build()
    meta = {"format": "pt", "encoder_attention_heads": str(ENC_HEADS),
            "decoder_attention_heads": str(DEC_HEADS)}
    sd5 = {k: v for k, v in model.state_dict().items()}
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp)
        sd4 = load_file(os.path.join(tmp, "model.safetensors"))
    assert any(k.startswith("model.backbone.conv_encoder.model.") for k in sd4), list(sd4)[:5]
    save_file(f16(sd4), os.path.join(OUT, "detr-hf4.safetensors"), metadata=meta)
    save_file(f16(sd5), os.path.join(OUT, "detr-hf5.safetensors"), metadata=meta)
    save_file(f16(original_names(sd5)), os.path.join(OUT, "detr-original.safetensors"),
              metadata=meta)
    for f in ("hf4", "hf5", "original"):
        goldenlib.sort_metadata(os.path.join(OUT, f"detr-{f}.safetensors"))

    x, m = batch(SIZES, H, W)
    out = run(model, x, m)
    logits, boxes = out.logits, out.pred_boxes
    check_heads(model, x, m, logits)
    print("attention peaks: encoder %.2f, decoder %.2f, cross %.2f" % tuple(
        goldenlib.attention_peak(a[-1]) for a in (out.encoder_attentions,
                                                   out.decoder_attentions, out.cross_attentions)))
    cross = out.cross_attentions[-1].mean(1)  # [B, Q, T]
    for name, t in (("logits", logits), ("boxes", boxes), ("cross", cross)):
        goldenlib.write_f32(f"detr-{name}.bin", t)
    # a threshold in the widest gap of the best scores around their median
    best = logits.softmax(-1)[..., :-1].max(-1).values  # [B, Q]
    prob = best.flatten().sort().values.tolist()
    threshold, gap = None, -1.0
    for lo, hi in zip(prob[:-1], prob[1:]):
        t = (lo + hi) / 2
        if (best > t).sum(1).min() >= 1 and (best < t).sum() >= 2 and hi - lo > gap:
            threshold, gap = t, hi - lo
    assert threshold is not None
    from transformers import DetrImageProcessor
    proc = DetrImageProcessor()
    det = proc.post_process_object_detection(out, threshold=threshold,
                                             target_sizes=[list(s) for s in SIZES])
    dets = [{"scores": d["scores"].tolist(), "labels": d["labels"].tolist(),
             "boxes": d["boxes"].tolist()} for d in det]
    json.dump({"batch": 2, "height": H, "width": W, "sizes": SIZES, "queries": QUERIES,
               "classes": LABELS + 1, "dim": D, "tokens": cross.shape[-1],
               "threshold": threshold, "detections": dets},
              open(os.path.join(OUT, "detr.json"), "w"), indent=1)

    # DC5 (the last stage dilated, output stride 16): its own weights, the same batch
    dmodel = build(dc5=True)
    with tempfile.TemporaryDirectory() as tmp:
        dmodel.save_pretrained(tmp)
        sdd = load_file(os.path.join(tmp, "model.safetensors"))
    save_file(f16(sdd), os.path.join(OUT, "detr-dc5.safetensors"),
              metadata=dict(meta, dilation="true"))
    goldenlib.sort_metadata(os.path.join(OUT, "detr-dc5.safetensors"))
    od = run(dmodel, x, m)
    check_heads(dmodel, x, m, od.logits, dc5=True)
    goldenlib.write_f32("detr-dc5-logits.bin", od.logits)
    goldenlib.write_f32("detr-dc5-boxes.bin", od.pred_boxes)

    xc, mc = batch([(48, 40)], 48, 64)
    oc = run(model, xc, mc)
    np.save(os.path.join(OUT, "detr-cli-input.npy"), xc.numpy())
    np.save(os.path.join(OUT, "detr-cli-mask.npy"), mc.numpy().astype(np.uint8))
    np.save(os.path.join(OUT, "detr-cli-logits.npy"), oc.logits.numpy())
    np.save(os.path.join(OUT, "detr-cli-boxes.npy"), oc.pred_boxes.numpy())
    print("threshold", threshold, "detections", [len(d["scores"]) for d in dets])
    for f in sorted(os.listdir(OUT)):
        if f.startswith("detr"):
            print(f, os.path.getsize(os.path.join(OUT, f)))


if __name__ == "__main__":
    main()
