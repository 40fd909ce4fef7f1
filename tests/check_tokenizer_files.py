#!/usr/bin/env python3
"""`pagoda tokenize` on small hand-made files (no Python package needed).

    check_tokenizer_files.py PAGODA WORKDIR [LIBPAGODA_MODELS]

Known answers of a tiny WordPiece and a tiny byte-level BPE (ids, decoding, [CLS]/[SEP],
special tokens in the text, invalid UTF-8 named by byte offset, invalid UTF-8 decoded to
U+FFFD); then hostile vocabularies, merges and tokenizer.json files, each refused with exit 1
and a message naming the file and the rule broken (never a crash or a silent result). With
the path of libpagoda-models, the same through its exported pgd_tokenizer_* (ctypes).
"""
import ctypes
import json
import os
import subprocess
import sys

FAILS = []


def run(pagoda, args, stdin=None):
    r = subprocess.run([pagoda, "tokenize"] + args, capture_output=True, check=False,
                       timeout=60)
    return r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")


def expect_ok(pagoda, args, want):
    rc, out, err = run(pagoda, args)
    got = json.loads(out) if rc == 0 else None
    if rc != 0 or got != want:
        FAILS.append(f"{args}: exit {rc}, got {got!r}, want {want!r}; stderr {err!r}")


def expect_error(pagoda, args, *needles):
    rc, out, err = run(pagoda, args)
    if rc != 1 or not all(n in err for n in needles) or "Sanitizer" in err:
        FAILS.append(f"{args}: exit {rc} (want 1), stderr {err!r} should name {needles}")


def write(work, name, data):
    path = os.path.join(work, name)
    with open(path, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)
    return path


def byte_chars():
    """GPT-2's byte → character map (the printable bytes themselves, the rest 256 + n)."""
    keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    out, n = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + n)
            n += 1
    return out


def wordpiece_cases(pagoda, work):
    vocab = write(work, "vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\nworld\n##s\n,\n"
                  "!\nh\n##e\n##llo\ncafe\n中\n.\n")
    expect_ok(pagoda, ["--vocab", vocab, "--json", "Hello, worlds! Café 中文 [MASK]."],
              {"ids": [2, 5, 8, 6, 7, 9, 13, 14, 1, 4, 15, 3],
               "tokens": ["[CLS]", "hello", ",", "world", "##s", "!", "cafe", "中", "[UNK]",
                          "[MASK]", ".", "[SEP]"]})
    expect_ok(pagoda, ["--vocab", vocab, "--json", "--cased", "--no-special", "Hello hello"],
              {"ids": [1, 5], "tokens": ["[UNK]", "hello"]})
    expect_ok(pagoda, ["--vocab", vocab, "--json", "--no-special", "x" * 101 + " hello"],
              {"ids": [1, 5], "tokens": ["[UNK]", "hello"]})
    expect_ok(pagoda, ["--vocab", vocab, "--json", "--decode", "2,5,8,6,7,9,10,11,12,15,3"],
              {"text": "[CLS] hello, worlds! hello. [SEP]"})
    expect_ok(pagoda, ["--vocab", vocab, "--json", "--decode", "--no-special", "2", "5", "3"],
              {"text": "hello"})
    bad = write(work, "bad-utf8.txt", b"hello \xff world")
    expect_error(pagoda, ["--vocab", vocab, "--file", bad], "bad-utf8.txt", "byte offset 6")
    expect_error(pagoda, ["--vocab", vocab, "--decode", "16"], "id 16", "not in the vocabulary")
    for name, text, needles in (
            ("dup.txt", "[UNK]\nhello\nhello\n", ("dup.txt", "'hello' has two ids")),
            ("empty-line.txt", "[UNK]\n\nhello\n", ("empty-line.txt", "line 2 is empty")),
            ("no-unk.txt", "hello\nworld\n", ("no-unk.txt", "no [UNK]")),
            ("long.txt", "[UNK]\n" + "a" * 5000 + "\n", ("long.txt", "line 2 is 5000 bytes")),
            ("binary.txt", b"[UNK]\nab\xc3\n", ("binary.txt", "not valid UTF-8")),
            ("nul.txt", b"[UNK]\na\x00b\n", ("nul.txt", "without NUL")),
            ("nothing.txt", "", ("nothing.txt", "no tokens"))):
        expect_error(pagoda, ["--vocab", write(work, name, text), "x"], *needles)
    expect_error(pagoda, ["--vocab", os.path.join(work, "missing.txt"), "x"], "missing.txt")
    return vocab


def bpe_files(work):
    bc = byte_chars()
    vocab = {bc[b]: b for b in range(256)}
    merges = [("h", "e"), ("l", "l"), ("he", "ll"), ("hell", "o"), (bc[32], "w"), ("o", "r")]
    for a, b in merges:
        vocab[a + b] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    v = write(work, "vocab.json", json.dumps(vocab))
    m = write(work, "merges.txt", "#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges))
    return vocab, v, m


def bpe_cases(pagoda, work):
    vocab, v, m = bpe_files(work)
    ids = [vocab["hello"], vocab["\u0120w"], vocab["or"], ord("l"), ord("d"),
           vocab["<|endoftext|>"], ord("'"), ord("s")]
    expect_ok(pagoda, ["--vocab", v, "--merges", m, "--json", "hello world<|endoftext|>'s"],
              {"ids": ids, "tokens": ["hello", "\u0120w", "or", "l", "d", "<|endoftext|>", "'s"[0],
                                      "s"]})
    # decoding bytes that are not UTF-8: one U+FFFD per maximal invalid sequence
    expect_ok(pagoda, ["--vocab", v, "--merges", m, "--json", "--decode",
                       f"{vocab['hello']},{vocab[byte_chars()[0xE2]]},{vocab[byte_chars()[0x82]]},"
                       f"{ord('!')}"], {"text": "hello\ufffd!"})
    bad = write(work, "bad-utf8-2.txt", b"ok \xed\xa0\x80 surrogate")
    expect_error(pagoda, ["--vocab", v, "--merges", m, "--file", bad], "byte offset 3")
    for name, text, needles in (
            ("m-unknown.txt", "h e\nzz q\n", ("m-unknown.txt", "merge 2", "'zz', not in the")),
            ("m-result.txt", "w o\n", ("m-result.txt", "merge 1", "not in the vocabulary")),
            ("m-dup.txt", "h e\nh e\n", ("m-dup.txt", "merge 2", "repeats merge 1")),
            ("m-three.txt", "h e l\n", ("m-three.txt", "line 1", "one space")),
            ("m-empty.txt", "h e\n\nl l\n", ("m-empty.txt", "line 2")),
            # 5 M lines: more merges than any vocabulary, refused before the table is made
            ("m-many.txt", "\n" * 5_000_000, ("m-many.txt", "merges (at most"))):
        expect_error(pagoda, ["--vocab", v, "--merges", write(work, name, text), "x"], *needles)
    for name, text, needles in (
            ("v-bad.json", "{\"a\": 0,", ("v-bad.json", "line 1")),
            ("v-dup.json", "{\"a\": 0, \"a\": 1}", ("v-dup.json", "duplicate")),
            ("v-id.json", "{\"a\": 0, \"b\": 0}", ("v-id.json", "id 0 given twice")),
            ("v-neg.json", "{\"a\": -1}", ("v-neg.json", "outside")),
            ("v-str.json", "{\"a\": \"0\"}", ("v-str.json", "not an integer")),
            ("v-list.json", "[1, 2]", ("v-list.json", "not a JSON object"))):
        expect_error(pagoda, ["--vocab", write(work, name, text), "--merges", m, "x"], *needles)


def json_cases(pagoda, work, vocab_txt):
    with open(vocab_txt, encoding="utf-8") as f:
        wp_vocab = {t: i for i, t in enumerate(f.read().split("\n")[:-1])}
    base = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
            "normalizer": {"type": "BertNormalizer", "clean_text": True,
                           "handle_chinese_chars": True, "strip_accents": None,
                           "lowercase": True},
            "pre_tokenizer": {"type": "BertPreTokenizer"}, "post_processor": None,
            "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
            "model": {"type": "WordPiece", "unk_token": "[UNK]",
                      "continuing_subword_prefix": "##", "max_input_chars_per_word": 100,
                      "vocab": wp_vocab}}
    good = write(work, "tok.json", json.dumps(base))
    expect_ok(pagoda, ["--tokenizer", good, "--json", "Hello worlds"],
              {"ids": [5, 6, 7], "tokens": ["hello", "world", "##s"]})
    cases = (
        ("normalizer", {"type": "NFKC"}, "normalizer 'NFKC' is not supported"),
        ("pre_tokenizer", {"type": "Whitespace"}, "pre_tokenizer 'Whitespace'"),
        ("decoder", {"type": "Metaspace"}, "decoder 'Metaspace'"),
        ("post_processor", {"type": "Sequence"}, "post_processor 'Sequence'"),
        ("padding", {"strategy": "BatchLongest"}, "padding"),
        ("model", {"type": "Unigram", "vocab": []}, "model 'Unigram'"),
        ("model", dict(base["model"], unk_token="[NOPE]"), "unk_token '[NOPE]'"),
        ("added_tokens", [{"id": 3, "content": "hello", "special": True}], "has id 3"),
        ("added_tokens", [{"id": 4, "content": "[MASK]", "single_word": True}], "single_word"),
    )
    for i, (key, value, needle) in enumerate(cases):
        doc = dict(base)
        doc[key] = value
        path = write(work, f"tok-bad-{i}.json", json.dumps(doc))
        expect_error(pagoda, ["--tokenizer", path, "x"], f"tok-bad-{i}.json", needle)
    expect_error(pagoda, ["--tokenizer", write(work, "tok-trunc.json", json.dumps(base)[:-40]),
                          "x"], "tok-trunc.json")


def api_cases(lib_path, work, vocab_txt):
    """pagoda_models.h's pgd_tokenizer_*: the CLI's answers, errors through pgd_error."""
    lib = ctypes.CDLL(lib_path)
    vp, c_int32, c_size = ctypes.c_void_p, ctypes.c_int32, ctypes.c_size_t
    lib.pgd_tokenizer_load.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int,
                                       ctypes.POINTER(vp), ctypes.POINTER(vp)]
    lib.pgd_tokenizer_encode.argtypes = [vp, ctypes.c_char_p, c_size, ctypes.c_int,
                                         ctypes.POINTER(ctypes.POINTER(c_int32)),
                                         ctypes.POINTER(c_size), ctypes.POINTER(vp)]
    lib.pgd_tokenizer_decode.argtypes = [vp, ctypes.POINTER(c_int32), c_size, ctypes.c_int,
                                         ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(c_size),
                                         ctypes.POINTER(vp)]
    lib.pgd_tokenizer_release.argtypes = [vp]
    lib.pgd_tokenizer_free.argtypes = [vp]
    lib.pgd_tokenizer_vocab_size.argtypes = [vp]
    lib.pgd_error_get_message.argtypes = [vp]
    lib.pgd_error_get_message.restype = ctypes.c_char_p
    lib.pgd_error_destroy.argtypes = [vp]
    tok, err = vp(), vp()
    if lib.pgd_tokenizer_load(vocab_txt.encode(), None, 1, ctypes.byref(tok), ctypes.byref(err)):
        FAILS.append("api: pgd_tokenizer_load failed on the vocab.txt the CLI reads")
        return
    text = "Hello, worlds! Café 中文 [MASK].".encode()
    ids, n = ctypes.POINTER(c_int32)(), c_size()
    rc = lib.pgd_tokenizer_encode(tok, text, len(text), 1, ctypes.byref(ids), ctypes.byref(n),
                                  ctypes.byref(err))
    got = [ids[i] for i in range(n.value)] if rc == 0 else None
    if got != [2, 5, 8, 6, 7, 9, 13, 14, 1, 4, 15, 3]:
        FAILS.append(f"api: encode gave {got} (rc {rc})")
    out, size = ctypes.c_char_p(), c_size()
    rc = lib.pgd_tokenizer_decode(tok, ids, n, 1, ctypes.byref(out), ctypes.byref(size),
                                  ctypes.byref(err))
    if rc or out.value != b"hello, worlds! cafe \xe4\xb8\xad.":  # [UNK], [MASK] skipped
        FAILS.append(f"api: decode gave {out.value!r} (rc {rc})")
    lib.pgd_tokenizer_release(ctypes.cast(ids, vp))
    lib.pgd_tokenizer_release(ctypes.cast(out, vp))
    bad = b"ok \xff"
    rc = lib.pgd_tokenizer_encode(tok, bad, len(bad), 0, ctypes.byref(ids), ctypes.byref(n),
                                  ctypes.byref(err))
    msg = lib.pgd_error_get_message(err) if err.value else b""
    if rc == 0 or b"byte offset 3" not in msg:
        FAILS.append(f"api: invalid UTF-8 gave rc {rc}, {msg!r}")
    lib.pgd_error_destroy(err)
    lib.pgd_tokenizer_free(tok)
    err = vp()
    rc = lib.pgd_tokenizer_load(os.path.join(work, "v-dup.json").encode(),
                                os.path.join(work, "merges.txt").encode(), 0, ctypes.byref(tok),
                                ctypes.byref(err))
    msg = lib.pgd_error_get_message(err) if err.value else b""
    if rc == 0 or tok.value or b"duplicate" not in msg:
        FAILS.append(f"api: a duplicate key in vocab.json gave rc {rc}, {msg!r}")
    lib.pgd_error_destroy(err)


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    pagoda, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    vocab_txt = wordpiece_cases(pagoda, work)
    bpe_cases(pagoda, work)
    json_cases(pagoda, work, vocab_txt)
    if len(sys.argv) == 4:
        api_cases(sys.argv[3], work, vocab_txt)
    for f in FAILS:
        print("FAIL:", f)
    if FAILS:
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
