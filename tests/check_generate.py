#!/usr/bin/env python3
"""`pagoda generate` on the GPT-2 goldens of tests/data (tools/golden/make-gpt2-golden.py); no Python
package needed.

    check_generate.py PAGODA DATA WORKDIR

Greedy text of a batch equal to transformers' generate (the golden ids); one prompt streamed
as text equal to the JSON's; sampling the same for the same seed and top-k 1 equal to greedy;
--stop ending a sequence; the random model said so; --attention-map writing a PNG; and bad
input (no config.json, n_head missing or not dividing n_embd, no tokenizer, an empty prompt,
too many tokens for n_positions, bad options) refused with the file or option named.
"""
import json
import os
import shutil
import struct
import subprocess
import sys

FAILS = []


def run(pagoda, args):
    r = subprocess.run([pagoda, "generate"] + args, capture_output=True, check=False,
                       timeout=300)
    return r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")


def check(cond, what):
    if not cond:
        FAILS.append(what)
    return cond


def run_json(pagoda, args):
    rc, out, err = run(pagoda, args + ["--json"])
    if not check(rc == 0, f"{args}: exit {rc}: {err}"):
        return None
    return json.loads(out)


def expect_error(pagoda, args, code, *needles):
    rc, out, err = run(pagoda, args)
    check(rc == code and all(n in err for n in needles) and "Sanitizer" not in err,
          f"{args}: exit {rc} (want {code}), stderr {err!r} should name {needles}")


def greedy_cases(pagoda, data):
    for name in ("gpt2-tiny", "gpt2-bare"):
        with open(os.path.join(data, name, "golden.json")) as f:
            g = json.load(f)
        doc = run_json(pagoda, ["--weights", os.path.join(data, name), "--max-new",
                                str(g["max_new"])] + g["prompts"])
        if doc is None:
            continue
        got = [s["ids"] for s in doc["sequences"]]
        check(got == g["greedy"], f"{name}: greedy ids {got} != transformers' {g['greedy']}")
        check([s["prompt_ids"] for s in doc["sequences"]] == g["prompt_ids"],
              f"{name}: prompt ids differ")
        check(doc["config"]["n_head"] == g["heads"] and doc["random_weights"] is False,
              f"{name}: config {doc['config']}")
    return g


def stream_case(pagoda, data):
    w = os.path.join(data, "gpt2-tiny")
    doc = run_json(pagoda, ["--weights", w, "--max-new", "20", "Once upon a time"])
    rc, out, err = run(pagoda, ["--weights", w, "--max-new", "20", "Once upon a time"])
    if doc is not None:
        want = "Once upon a time" + doc["sequences"][0]["text"] + "\n"
        check(rc == 0 and out == want, f"streamed text {out!r} != {want!r}")
        check("tokens/s" in err, f"no speed on stderr: {err!r}")
    return doc


def sampling_cases(pagoda, data, greedy_doc):
    w = os.path.join(data, "gpt2-tiny")
    base = ["--weights", w, "--max-new", "20", "Once upon a time"]
    a = run_json(pagoda, base + ["--temperature", "1.5", "--seed", "7"])
    b = run_json(pagoda, base + ["--temperature", "1.5", "--seed", "7"])
    c = run_json(pagoda, base + ["--temperature", "1.5", "--seed", "8"])
    k1 = run_json(pagoda, base + ["--top-k", "1", "--seed", "9"])
    p = run_json(pagoda, base + ["--top-p", "0.9", "--top-k", "50", "--seed", "7"])
    if None in (a, b, c, k1, p, greedy_doc):
        return
    ids = lambda d: d["sequences"][0]["ids"]
    check(ids(a) == ids(b), "the same seed drew different tokens")
    check(ids(a) != ids(c), "seeds 7 and 8 drew the same 20 tokens")
    check(ids(k1) == ids(greedy_doc), "--top-k 1 is not greedy")
    check(a["sampling"]["mode"] == "sample" and a["sampling"]["seed"] == 7, f"{a['sampling']}")
    check(greedy_doc["sampling"]["mode"] == "greedy", "greedy not said")


def stop_case(pagoda, data, greedy_doc):
    w = os.path.join(data, "gpt2-tiny")
    text = greedy_doc["sequences"][0]["text"]
    stop = text[6:9]
    doc = run_json(pagoda, ["--weights", w, "--max-new", "20", "--stop", stop, "Once upon a time"])
    if doc:
        s = doc["sequences"][0]
        check(s["ended"] == "stop" and stop in s["text"] and len(s["ids"]) < 20,
              f"--stop {stop!r}: {s}")


def map_case(pagoda, data, work):
    w = os.path.join(data, "gpt2-tiny")
    out = os.path.join(work, "map.png")
    rc, _, err = run(pagoda, ["--weights", w, "--max-new", "6", "--attention-map", out,
                              "--map-layers", "0,1", "--map-heads", "1", "Once upon a time"])
    if check(rc == 0 and os.path.isfile(out), f"--attention-map: exit {rc}: {err}"):
        with open(out, "rb") as f:
            head = f.read(24)
        wpx, hpx = struct.unpack(">II", head[16:24])
        check(head[:8] == b"\x89PNG\r\n\x1a\n" and wpx > 100 and hpx > 100,
              f"map.png: {head!r}")
    expect_error(pagoda, ["--weights", w, "--max-new", "2", "--attention-map", out,
                          "--map-layers", "5", "Hi"], 1, "--map-layers")
    expect_error(pagoda, ["--weights", w, "--attention-map", work, "Hi"], 1, work)
    expect_error(pagoda, ["--map-layers", "0", "Hi"], 2, "--attention-map")


def random_case(pagoda):
    rc, out, err = run(pagoda, ["--max-new", "5", "--seed", "1", "--sample", "Hello"])
    check(rc == 0 and "seeded random weights" in err and out.startswith("Hello"),
          f"random: exit {rc} {out!r} {err!r}")


def write_model(work, name, config, tokenizer=True, data=None):
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    src = os.path.join(data, "gpt2-tiny")
    shutil.copy(os.path.join(src, "model.safetensors"), d)
    if tokenizer:
        shutil.copy(os.path.join(src, "vocab.json"), d)
        shutil.copy(os.path.join(src, "merges.txt"), d)
    if config is not None:
        with open(os.path.join(d, "config.json"), "w") as f:
            f.write(config if isinstance(config, str) else json.dumps(config))
    return d


def error_cases(pagoda, data, work):
    with open(os.path.join(data, "gpt2-tiny", "config.json")) as f:
        cfg = json.load(f)
    d = write_model(work, "no-config", None, data=data)
    expect_error(pagoda, ["--weights", d, "Hi"], 1, "config.json", "n_embd")
    d = write_model(work, "no-heads", {k: v for k, v in cfg.items() if k != "n_head"}, data=data)
    expect_error(pagoda, ["--weights", d, "Hi"], 1, "config.json", "n_head")
    d = write_model(work, "bad-heads", {**cfg, "n_head": 5}, data=data)
    expect_error(pagoda, ["--weights", d, "Hi"], 1, "config.json", "does not divide")
    d = write_model(work, "wide", {**cfg, "n_embd": 64}, data=data)
    expect_error(pagoda, ["--weights", d, "Hi"], 1, "n_embd 64", "wte")
    d = write_model(work, "layers", {**cfg, "n_layer": 3}, data=data)
    expect_error(pagoda, ["--weights", d, "Hi"], 1, "n_layer 3")
    d = write_model(work, "broken", "{\"n_embd\": 48,", data=data)
    expect_error(pagoda, ["--weights", d, "Hi"], 1, "config.json")
    d = write_model(work, "no-tok", cfg, tokenizer=False, data=data)
    expect_error(pagoda, ["--weights", d, "Hi"], 1, "tokenizer")
    w = os.path.join(data, "gpt2-tiny")
    expect_error(pagoda, ["--weights", w, ""], 1, "empty")
    expect_error(pagoda, ["--weights", w, "--max-new", "500", "Hi"], 1, "n_positions")
    expect_error(pagoda, ["--weights", os.path.join(work, "nowhere"), "Hi"], 1, "nowhere")
    expect_error(pagoda, ["--weights", os.path.join(data, "vit-hf.safetensors"), "Hi"], 1,
                 "config.json")
    expect_error(pagoda, ["--max-new", "0", "Hi"], 2, "--max-new")
    expect_error(pagoda, ["--top-p", "0", "Hi"], 2, "--top-p")
    expect_error(pagoda, ["--temperature", "-1", "Hi"], 2, "--temperature")
    expect_error(pagoda, ["--top-k", "x", "Hi"], 2, "--top-k")
    expect_error(pagoda, [], 2, "PROMPT")
    expect_error(pagoda, ["--weights-dtype", "f8", "Hi"], 2, "--weights-dtype")
    doc = run_json(pagoda, ["--weights", w, "--weights-dtype", "f16", "--max-new", "4", "Hi"])
    check(doc is not None and len(doc["sequences"][0]["ids"]) == 4, "--weights-dtype f16 runs")


def main():
    pagoda, data, work = sys.argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    greedy_cases(pagoda, data)
    doc = stream_case(pagoda, data)
    sampling_cases(pagoda, data, doc)
    if doc:
        stop_case(pagoda, data, doc)
    map_case(pagoda, data, work)
    random_case(pagoda)
    error_cases(pagoda, data, work)
    for f in FAILS:
        print("FAIL:", f)
    print(f"check_generate: {len(FAILS)} failure(s)")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
