#!/usr/bin/env python3
"""Tokenizer equality: `pagoda tokenize` against Hugging Face's tokenizers and transformers.

    check_tokenizers.py PAGODA WORKDIR [--bench]

Trains small vocabularies offline with the `tokenizers` package (WordPiece lower-cased and
cased, byte-level BPE; 8,000 tokens each, WordPiece's alphabet cut to 1,000 characters) on a
corpus made here without network: the source files of Python's standard library (code,
comments, docstrings) and synthesised text from Unicode ranges. Then encodes a held-out corpus (other standard-library files, more synthesised
text, and hand-written edge cases: combining marks, emoji with zero-width joiners, CJK,
Arabic, controls, white-space runs, very long words, the special tokens in the text) line by
line with `pagoda tokenize --lines` and with the reference, and requires every id to be equal:
BertTokenizer(Fast) with do_lower_case true and false and GPT2Tokenizer(Fast) from
transformers when it is importable, the tokenizers package's own classes and tokenizer.json
always. Decoding is compared with the decode of both. Invalid UTF-8 must be an
error naming the byte offset.

Exits 77 (skipped) when the tokenizers package is not importable by this Python nor by
$PAGODA_HF_PYTHON (a Python that has it, e.g. one with torch and transformers).
--bench also prints encoding throughput (MB/s, one thread) of both on the held-out corpus.
"""
import json
import os
import random
import subprocess
import sys
import sysconfig
import time
import unicodedata

try:
    import tokenizers  # noqa: F401
except ImportError:
    other = os.environ.get("PAGODA_HF_PYTHON")
    if other and not os.environ.get("PAGODA_HF_PYTHON_TRIED"):
        # (venvs share one interpreter binary: the marker, not the path, stops a loop)
        os.environ["PAGODA_HF_PYTHON_TRIED"] = "1"
        os.execv(other, [other] + sys.argv)
    print("tokenizers is not importable: skipped (pip install tokenizers)")
    sys.exit(77)

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
from tokenizers import trainers

try:
    import transformers  # noqa: F401
    from transformers import BertTokenizerFast, GPT2TokenizerFast
except Exception:  # transformers is optional: the tokenizers classes are the reference then
    BertTokenizerFast = GPT2TokenizerFast = None

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
VOCAB = 8000


def stdlib_files():
    root = sysconfig.get_paths()["stdlib"]
    out = []
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x not in ("site-packages", "test", "__pycache__"))
        out += [os.path.join(d, f) for f in sorted(files) if f.endswith(".py")]
    return out


def read_files(paths, limit):
    text, n = [], 0
    for p in paths:
        try:
            with open(p, encoding="utf-8") as f:
                s = f.read()
        except (UnicodeDecodeError, OSError):
            continue
        text.append(s)
        n += len(s)
        if n >= limit:
            break
    return "\n".join(text)


def unicode_pools():
    pools = {}
    for cp in range(0x20, 0x30000):
        if 0xD800 <= cp < 0xE000:
            continue
        cat = unicodedata.category(chr(cp))
        pools.setdefault(cat[0], []).append(chr(cp))
        pools.setdefault(cat, []).append(chr(cp))
    return pools


def synth(rng, pools, n_lines):
    """Lines of random 'words' from Unicode letters, marks, digits, punctuation, symbols."""
    emoji = [chr(c) for c in range(0x1F300, 0x1FAFF)]
    spaces = [" ", "  ", "\t", "\u00a0", "\u3000", "\u2003", " \u200b ", "\u0085", "\u2028",
              " \x0b ", "\x0c", "\r", "   \t "]
    cjk = [chr(c) for c in range(0x4E00, 0x9FFF)]
    arabic = [chr(c) for c in range(0x0621, 0x064A)]
    harakat = [chr(c) for c in range(0x064B, 0x0653)]
    lines = []
    for _ in range(n_lines):
        words = []
        for _ in range(rng.randint(1, 12)):
            kind = rng.random()
            if kind < 0.3:
                w = "".join(rng.choice(pools["L"]) for _ in range(rng.randint(1, 8)))
            elif kind < 0.4:
                w = "".join(rng.choice(pools["L"]) + rng.choice(pools["Mn"])
                            for _ in range(rng.randint(1, 4)))
            elif kind < 0.5:
                w = "".join(rng.choice(cjk) for _ in range(rng.randint(1, 5)))
            elif kind < 0.6:
                w = "".join(rng.choice(arabic) + rng.choice(harakat) for _ in range(3))
            elif kind < 0.7:
                w = "\u200d".join(rng.choice(emoji) for _ in range(rng.randint(1, 3)))
                w += rng.choice(["", "\ufe0f", "\U0001F3FD"])
            elif kind < 0.8:
                w = "".join(rng.choice(pools["N"]) for _ in range(rng.randint(1, 4)))
            elif kind < 0.9:
                w = "".join(rng.choice(pools["P"] + pools["S"]) for _ in range(rng.randint(1, 3)))
            else:
                w = "".join(chr(rng.randint(0, 0x10FFFF)) for _ in range(rng.randint(1, 3)))
                w = "".join(c for c in w if not 0xD800 <= ord(c) < 0xE000 and c != "\n")
            words.append(w)
        lines.append("".join(w + rng.choice(spaces) for w in words).rstrip("\n"))
    return lines


EDGE = [
    "", " ", "  ", "\t\t", "a", "Hello, world!", "HELLO World", "héllo wörld Ünïcödé",
    "e\u0301 o\u0308 A\u030a\u0301", "\u1e9b\u0323 \u0344 \u1f82", "İstanbul ΣΑΣ ßtraße ǅ",
    "Café\u0301\u0301 naïve coöperate", "👨‍👩‍👧‍👦 family 👍🏽 thumbs 🏳️‍🌈 flag", "🇫🇷🇩🇪 flags",
    "中文字符测试，日本語のテキスト。한국어 텍스트", "𠀀𠀁𪜀 rare CJK", "Ａｂｃ１２３ fullwidth",
    "مرحبا بالعالم، كيف حالك؟", "الْعَرَبِيَّةُ", "שָׁלוֹם", "नमस्ते दुनिया", "สวัสดีครับ",
    "zero\u200bwidth\u200cnon\u200djoiner\ufeffbom", "ctrl\x01\x02\x07\x1b[31mred\x7f\x9f",
    "nul\x00byte", "repl\ufffdchar", "private\ue000\U000F0000use", "nonchar\ufffe\uffff",
    "unassigned\u0378\U000E0080", "tabs\tand\u00a0nbsp\u3000ideographic\u2003em",
    "trailing spaces   ", "   leading", "a  b   c    d", "\r\rcr \x0bvt\x0cff",
    "don't I'm we've they're he'll she'd it's", "DON'T I'M 'S 'tis ''quoted''",
    "x" * 99, "y" * 100, "z" * 101, "w" * 300, "abc" * 700, "é" * 150, "日" * 200,
    "1234567890 3.14159 1,000,000 ١٢٣ ๑๒๓", "$100 €50 £20 ¥1000 ₹ ₿", "a+b=c; x<y>z; {[()]}",
    "http://example.com/path?q=1&r=2#frag", "user@example.com", "C++ C# F# .NET",
    "[CLS] [SEP] [MASK] [UNK] [PAD] [mask] [ MASK ]", "x[MASK]y", "<|endoftext|>",
    "a<|endoftext|>b <|endoftext|> c<|endoftext|><|endoftext|>", "<|endoftext|",
    "\u00ad soft hyphen \u2060 word joiner \u180e mongolian", "ﬁ ﬂ ligatures ℌ ℍ ①②",
    "Ǆ ǅ ǆ ǈ titlecase Ⅸ roman", "ÅΩK Ω Å K", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝟙𝟚𝟛", "ｶﾀｶﾅ halfwidth",
    "\u0300leading combining", "a\u0300\u0316\u0301\u0317 marks to reorder",
    "\u0345\u0300 ccc 240 before 230", "\u05b0\u05b1\u05c1 hebrew points",
    "e" + "\u0301\U0001d16d\u0316\U0001d165\u0345\u05b0\u093c" * 30 + " long runs of marks in disorder",
]


def build_corpora():
    rng = random.Random(41)
    files = stdlib_files()
    rng.shuffle(files)
    half = len(files) // 2
    pools = unicode_pools()
    train = read_files(files[:half], 3_000_000).split("\n") + synth(rng, pools, 4000)
    held = read_files(files[half:], 1_500_000).split("\n") + synth(rng, pools, 3000) + EDGE
    # lines are what --lines reads: split at \n only (they may hold \r, \x0b, \u2028, ...)
    held = [line for x in held for line in x.split("\n")]
    return train, held


def train_wordpiece(lines, lower, out):
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=lower)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    # the synthesised text holds tens of thousands of distinct characters: without a limit
    # they would all be the alphabet, leaving no room for word pieces
    tok.train_from_iterator(lines, trainers.WordPieceTrainer(
        vocab_size=VOCAB, limit_alphabet=1000, special_tokens=SPECIALS))
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    os.makedirs(out, exist_ok=True)
    tok.save(os.path.join(out, "tokenizer.json"))
    tok.model.save(out)
    return tok


def train_bpe(lines, out):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.train_from_iterator(lines, trainers.BpeTrainer(
        vocab_size=VOCAB, special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    os.makedirs(out, exist_ok=True)
    tok.save(os.path.join(out, "tokenizer.json"))
    tok.model.save(out)
    return tok


def ours(pagoda, args, path):
    r = subprocess.run([pagoda, "tokenize"] + args + ["--file", path, "--lines"],
                       capture_output=True, check=False)
    if r.returncode:
        sys.exit(f"FAIL: pagoda tokenize {' '.join(args)}: exit {r.returncode}: "
                 f"{r.stderr.decode(errors='replace')}")
    # one object a line: split at \n only (the JSON may hold U+2028 or U+0085 unescaped)
    return [json.loads(x) for x in r.stdout.decode().split("\n")[:-1]]


def compare(name, lines, got, want_ids, want_text=None):
    if len(got) != len(lines):
        sys.exit(f"FAIL: {name}: {len(got)} results for {len(lines)} lines")
    bad, ids = 0, 0
    for i, (line, g) in enumerate(zip(lines, got)):
        if "error" in g:
            sys.exit(f"FAIL: {name}: line {i} {line[:80]!r}: {g['error']}")
        ids += len(want_ids[i])
        wrong = g["ids"] != want_ids[i] or (want_text is not None and g["decoded"] != want_text[i])
        if wrong:
            bad += 1
            if bad <= 5:
                print(f"  {name}: line {i} {line[:120]!r}\n    ours {g['ids'][:40]} "
                      f"{g['decoded'][:80]!r}\n    want {want_ids[i][:40]} "
                      f"{(want_text[i] if want_text else '')[:80]!r}")
    print(f"{name}: {len(lines)} lines, {ids} ids compared, {bad} lines differ")
    return bad


def check_invalid_utf8(pagoda, args, work):
    path = os.path.join(work, "invalid.txt")
    with open(path, "wb") as f:
        f.write(b"good text \xe2\x82 then bad")
    r = subprocess.run([pagoda, "tokenize"] + args + ["--file", path], capture_output=True,
                       check=False)
    err = r.stderr.decode(errors="replace")
    if r.returncode != 1 or "byte offset 10" not in err:
        sys.exit(f"FAIL: invalid UTF-8: exit {r.returncode}, stderr {err!r}")


def hf_bert(vocab, lower):
    """transformers' BertTokenizer(Fast) from a vocab.txt (5.x takes the vocabulary, 4.x the
    file)."""
    with open(vocab, encoding="utf-8") as f:
        v = {line.rstrip("\n"): i for i, line in enumerate(f)}
    try:
        return BertTokenizerFast(vocab=v, do_lower_case=lower)
    except TypeError:
        return BertTokenizerFast(vocab_file=vocab, do_lower_case=lower)


def hf_gpt2(vocab, merges):
    with open(vocab, encoding="utf-8") as f:
        v = json.load(f)
    with open(merges, encoding="utf-8") as f:
        m = [tuple(x.split(" ")) for x in f.read().split("\n")
             if x and not x.startswith("#version")]
    try:
        return GPT2TokenizerFast(vocab=v, merges=m)
    except TypeError:
        return GPT2TokenizerFast(vocab_file=vocab, merges_file=merges)


def run_checks(pagoda, work, held_path, held, toks):
    wp_lower, wp_cased, bpe = toks
    bad = 0
    for lower, tok, d in ((True, wp_lower, "wp-lower"), (False, wp_cased, "wp-cased")):
        vocab = os.path.join(work, d, "vocab.txt")
        args = ["--vocab", vocab] + ([] if lower else ["--cased"])
        got = ours(pagoda, args, held_path)
        enc = tok.encode_batch(held)
        dec = tok.decode_batch([e.ids for e in enc], skip_special_tokens=True)
        bad += compare(f"WordPiece {d} vocab.txt vs tokenizers", held, got,
                       [e.ids for e in enc], dec)
        if BertTokenizerFast is not None:
            ref = hf_bert(vocab, lower)
            want = ref(held)["input_ids"]
            bad += compare(f"WordPiece {d} vocab.txt vs transformers BertTokenizerFast", held,
                           got, want, ref.batch_decode(want, skip_special_tokens=True))
        got = ours(pagoda, ["--tokenizer", os.path.join(work, d, "tokenizer.json")], held_path)
        bad += compare(f"WordPiece {d} tokenizer.json", held, got, [e.ids for e in enc], dec)
    d = os.path.join(work, "bpe")
    got = ours(pagoda, ["--vocab", os.path.join(d, "vocab.json"), "--merges",
                        os.path.join(d, "merges.txt")], held_path)
    enc = bpe.encode_batch(held)
    dec = bpe.decode_batch([e.ids for e in enc], skip_special_tokens=True)
    bad += compare("BPE vocab.json+merges.txt vs tokenizers", held, got, [e.ids for e in enc], dec)
    if GPT2TokenizerFast is not None:
        ref = hf_gpt2(os.path.join(d, "vocab.json"), os.path.join(d, "merges.txt"))
        want = ref(held)["input_ids"]
        bad += compare("BPE vocab.json+merges.txt vs transformers GPT2TokenizerFast", held, got,
                       want, ref.batch_decode(want, skip_special_tokens=True))
    got = ours(pagoda, ["--tokenizer", os.path.join(d, "tokenizer.json")], held_path)
    bad += compare("BPE tokenizer.json", held, got, [e.ids for e in enc], dec)
    check_invalid_utf8(pagoda, ["--vocab", os.path.join(work, "wp-lower", "vocab.txt")], work)
    check_invalid_utf8(pagoda, ["--tokenizer", os.path.join(d, "tokenizer.json")], work)
    return bad


def bench(pagoda, work, held_text, toks):
    path = os.path.join(work, "held-whole.txt")
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(held_text)
    size = len(held_text.encode())
    for name, tok, args in (
            ("WordPiece", toks[0], ["--vocab", os.path.join(work, "wp-lower", "vocab.txt")]),
            ("BPE", toks[2], ["--tokenizer", os.path.join(work, "bpe", "tokenizer.json")])):
        r = subprocess.run([pagoda, "tokenize"] + args + ["--file", path, "--time", "--json"],
                           capture_output=True, check=True)
        t0, reps = time.perf_counter(), 0
        while time.perf_counter() - t0 < 1.0 or reps < 2:
            tok.encode(held_text)
            reps += 1
        whole = size * reps / (time.perf_counter() - t0) / 1e6
        lines = held_text.split("\n")
        t0 = time.perf_counter()
        tok.encode_batch(lines)  # serial: TOKENIZERS_PARALLELISM=false
        batch = size / (time.perf_counter() - t0) / 1e6
        print(f"{name}: pagoda {r.stderr.decode().strip()}; tokenizers {whole:.2f} MB/s as one "
              f"text, {batch:.2f} MB/s line by line ({size} bytes, one thread)")


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    pagoda, work = sys.argv[1], sys.argv[2]
    os.environ["RAYON_NUM_THREADS"] = "1"
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    os.makedirs(work, exist_ok=True)
    train, held = build_corpora()
    toks = (train_wordpiece(train, True, os.path.join(work, "wp-lower")),
            train_wordpiece(train, False, os.path.join(work, "wp-cased")),
            train_bpe(train, os.path.join(work, "bpe")))
    held_path = os.path.join(work, "held.txt")
    with open(held_path, "w", encoding="utf-8", newline="") as f:
        f.write("\n".join(held))
    print(f"corpus: {sum(len(x.encode()) for x in train)} bytes trained on, "
          f"{os.path.getsize(held_path)} bytes held out in {len(held)} lines")
    bad = run_checks(pagoda, work, held_path, held, toks)
    if "--bench" in sys.argv:
        bench(pagoda, work, "\n".join(held), toks)
    if bad:
        sys.exit(f"FAIL: {bad} lines differ")
    print("ok")


if __name__ == "__main__":
    main()
