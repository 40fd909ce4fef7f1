"""Text: the tokenizers (identical to Hugging Face's) and the BERT-family encoders (BERT,
DistilBERT, RoBERTa) over libpagoda-models, as `pagoda fill-mask` and `pagoda embed-text` run
them (docs/text.md).

    with pagoda.Context() as ctx:
        bert = pagoda.load("bert-base-uncased/", ctx)     # a save_pretrained folder
        print(bert.fill_mask("Paris is the [MASK] of France."))
        e = bert.embed(["A cat.", "A dog."])              # [2, hidden], mean pooling
"""

from __future__ import annotations

import json
import os
from ctypes import POINTER, byref, c_float, c_int32, c_size_t, c_void_p, cast, string_at
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from ._capi import BertInfo, api
from .device import Context
from .errors import InvalidArgumentError, NotFoundError, UnsupportedError, raise_from
from .tensor import Handle

TEXT_TYPES = ("bert", "roberta", "distilbert", "xlm-roberta", "camembert")
PathLike = Union[str, "os.PathLike[str]"]


class Tokenizer:
    """A tokenizer: a tokenizer.json, BERT's vocab.txt (lowercase as do_lower_case), or GPT-2's
    vocab.json with merges.txt."""

    def __init__(self, path: PathLike, merges: Optional[PathLike] = None,
                 lowercase: bool = True) -> None:
        self._h: Optional[int] = None
        out, err = c_void_p(), c_void_p()
        raise_from(api.pgd_tokenizer_load(os.fsencode(path),
                                          os.fsencode(merges) if merges else None,
                                          int(lowercase), byref(out), byref(err)), err)
        self._h = out.value
        self.path = os.fspath(path)

    @classmethod
    def beside(cls, weights: PathLike) -> "Tokenizer":
        """The tokenizer beside a model's weights (a folder or a file in it), as the CLI finds
        it: tokenizer.json, else vocab.txt (lower-cased as tokenizer_config.json's
        do_lower_case says, True without one), else vocab.json + merges.txt."""
        d = os.fspath(weights)
        d = d if os.path.isdir(d) else os.path.dirname(d) or "."
        j = os.path.join
        if os.path.exists(j(d, "tokenizer.json")):
            return cls(j(d, "tokenizer.json"))
        if os.path.exists(j(d, "vocab.txt")):
            lower = True
            if os.path.exists(j(d, "tokenizer_config.json")):
                with open(j(d, "tokenizer_config.json"), encoding="utf-8") as f:
                    lower = json.load(f).get("do_lower_case", True) is not False
            return cls(j(d, "vocab.txt"), lowercase=lower)
        if os.path.exists(j(d, "vocab.json")) and os.path.exists(j(d, "merges.txt")):
            return cls(j(d, "vocab.json"), j(d, "merges.txt"))
        raise NotFoundError(f"pagoda: {d}: no tokenizer beside the weights (tokenizer.json, "
                            f"vocab.txt, or vocab.json + merges.txt)")

    def _handle(self) -> int:
        if self._h is None:
            raise InvalidArgumentError("pagoda: the tokenizer is closed")
        return self._h

    def encode(self, text: str, add_special: bool = True) -> List[int]:
        """The ids of text (BERT: [CLS] ... [SEP] around them unless add_special is False)."""
        data = text.encode("utf-8", "surrogatepass")
        ids, n, err = POINTER(c_int32)(), c_size_t(), c_void_p()
        raise_from(api.pgd_tokenizer_encode(self._handle(), data, len(data), int(add_special),
                                            byref(ids), byref(n), byref(err)), err)
        try:
            return [ids[i] for i in range(n.value)]
        finally:
            api.pgd_tokenizer_release(cast(ids, c_void_p))

    def decode(self, ids: Sequence[int], skip_special: bool = True) -> str:
        arr = (c_int32 * max(len(ids), 1))(*[int(i) for i in ids])
        text, n, err = c_void_p(), c_size_t(), c_void_p()
        raise_from(api.pgd_tokenizer_decode(self._handle(), arr, len(ids), int(skip_special),
                                            byref(text), byref(n), byref(err)), err)
        try:
            return string_at(text.value, n.value).decode("utf-8")
        finally:
            api.pgd_tokenizer_release(text)

    def token(self, i: int) -> Optional[str]:
        n = c_size_t()
        p = api.pgd_tokenizer_token(self._handle(), int(i), byref(n))
        return string_at(p, n.value).decode("utf-8", "replace") if p else None

    def id(self, token: str) -> int:
        b = token.encode("utf-8")
        return int(api.pgd_tokenizer_id(self._handle(), b, len(b)))

    @property
    def vocab_size(self) -> int:
        return int(api.pgd_tokenizer_vocab_size(self._handle()))

    def close(self) -> None:
        h, self._h = self._h, None
        if h is not None:
            api.pgd_tokenizer_free(h)

    def __del__(self) -> None:
        self.close()


def is_text_model(path: PathLike) -> bool:
    """Whether path is a folder, or a file in one, whose config.json names a BERT-family
    model_type."""
    p = os.fspath(path)
    d = p if os.path.isdir(p) else os.path.dirname(p) or "."
    try:
        with open(os.path.join(d, "config.json"), encoding="utf-8") as f:
            return json.load(f).get("model_type") in TEXT_TYPES
    except (OSError, ValueError, AttributeError):
        return False


class Bert(Handle):
    """A BERT-family encoder loaded on a context (pagoda.load of a text model's folder)."""

    def __init__(self, ctx: Context, h: int, tokenizer: Optional[Tokenizer]) -> None:
        super().__init__(ctx, h, api.pgd_bert_destroy)
        info = BertInfo()
        api.pgd_bert_get_info(h, byref(info))
        self.family = "bert"
        self.arch: str = info.arch.decode()
        self.layers, self.hidden, self.heads = info.layers, info.hidden, info.heads
        self.vocab, self.positions, self.type_vocab = info.vocab, info.positions, info.type_vocab
        self.pad_id: int = info.pad_id if info.pad_id >= 0 else 0
        self.mlm = bool(info.mlm)
        self.tokenizer = tokenizer

    def __repr__(self) -> str:
        return (f"<pagoda.Bert {self.arch}: {self.layers} layers, width {self.hidden}, "
                f"{self.heads} heads{', MLM head' if self.mlm else ''}>")

    def forward(self, ids: Any, attention_mask: Any = None, token_type_ids: Any = None, *,
                logits: bool = True, attentions: bool = False) -> Dict[str, np.ndarray]:
        """ids [B, S] (or one sequence [S]); attention_mask 1 for tokens, 0 for padding;
        token_type_ids. Returns {"hidden": [B, S, hidden], "logits": [B, S, vocab] (with the
        MLM head), "attentions": [layers, B, heads, S, S] (when asked)}."""
        x = np.ascontiguousarray(np.atleast_2d(np.asarray(ids)), dtype=np.int32)
        if x.ndim != 2 or x.size == 0:
            raise InvalidArgumentError(f"pagoda: ids are [B, S], not {list(np.shape(ids))}")
        B, S = x.shape

        def opt(a: Any, what: str) -> Any:
            if a is None:
                return None
            a = np.ascontiguousarray(np.atleast_2d(np.asarray(a)), dtype=np.int32)
            if a.shape != x.shape:
                raise InvalidArgumentError(f"pagoda: {what} is {list(a.shape)}, ids are "
                                           f"{[B, S]}")
            return a
        mask, types = opt(attention_mask, "attention_mask"), opt(token_type_ids, "token_type_ids")
        out = {"hidden": np.empty((B, S, self.hidden), np.float32)}
        if logits and self.mlm:
            out["logits"] = np.empty((B, S, self.vocab), np.float32)
        if attentions:
            out["attentions"] = np.empty((self.layers, B, self.heads, S, S), np.float32)

        def ptr(a: Optional[np.ndarray], kind: Any) -> Any:
            return None if a is None else a.ctypes.data_as(kind)
        self._ctx._enter()
        try:
            err = c_void_p()
            raise_from(api.pgd_bert_forward(
                self._handle(), B, S, x.ctypes.data, None if mask is None else mask.ctypes.data,
                None if types is None else types.ctypes.data,
                ptr(out["hidden"], POINTER(c_float)), ptr(out.get("logits"), POINTER(c_float)),
                ptr(out.get("attentions"), POINTER(c_float)), byref(err)), err)
        finally:
            self._ctx._exit()
        return out

    __call__ = forward

    def _tok(self) -> Tokenizer:
        if self.tokenizer is None:
            raise NotFoundError("pagoda: this model has no tokenizer (none beside its weights)")
        return self.tokenizer

    def encode(self, texts: Union[str, Sequence[str]]) -> Tuple[np.ndarray, np.ndarray]:
        """Texts as one right-padded batch: (ids [B, S], attention_mask [B, S])."""
        texts = [texts] if isinstance(texts, str) else list(texts)
        if not texts:
            raise InvalidArgumentError("pagoda: no texts given")
        seqs = [self._tok().encode(t) for t in texts]
        S = max(len(s) for s in seqs)
        ids = np.full((len(seqs), S), self.pad_id, np.int32)
        mask = np.zeros((len(seqs), S), np.int32)
        for b, s in enumerate(seqs):
            ids[b, : len(s)], mask[b, : len(s)] = s, 1
        return ids, mask

    def fill_mask(self, text: str, top_k: int = 5) -> List[List[Dict[str, Any]]]:
        """For each mask token of text, its top_k candidates: {"token", "id", "probability",
        "sequence"} (the text filled in), best first, as `pagoda fill-mask --json` gives."""
        if not self.mlm:
            raise UnsupportedError("pagoda: the model has no masked-LM head")
        tok = self._tok()
        mask_id = next((i for i in (tok.id("[MASK]"), tok.id("<mask>")) if i >= 0), -1)
        ids, mask = self.encode(text)
        logits = self.forward(ids, mask)["logits"][0].astype(np.float64)
        out = []
        for pos in np.nonzero(ids[0] == mask_id)[0]:
            row = logits[pos]
            p = np.exp(row - row.max())
            p /= p.sum()
            best = np.argsort(-row, kind="stable")[:top_k]
            cands = []
            for i in best:
                filled = ids[0].copy()
                filled[pos] = i
                cands.append({"token": tok.token(int(i)), "id": int(i),
                              "probability": float(p[i]), "sequence": tok.decode(filled)})
            out.append(cands)
        if not out:
            raise InvalidArgumentError("pagoda: the text has no mask token ([MASK] or <mask>)")
        return out

    def embed(self, texts: Union[str, Sequence[str]], pooling: str = "mean",
              normalize: bool = False) -> np.ndarray:
        """Sentence embeddings [B, hidden] as sentence-transformers computes them: the mean of
        the last hidden state over each text's tokens, or the first token's (pooling="cls");
        normalize: unit length."""
        if pooling not in ("mean", "cls"):
            raise InvalidArgumentError(f"pagoda: pooling is 'mean' or 'cls', not {pooling!r}")
        ids, mask = self.encode(texts)
        h = self.forward(ids, mask, logits=False)["hidden"].astype(np.float64)
        if pooling == "cls":
            e = h[:, 0]
        else:
            m = mask[:, :, None].astype(np.float64)
            e = (h * m).sum(1) / m.sum(1)
        if normalize:
            e = e / np.linalg.norm(e, axis=1, keepdims=True)
        return e.astype(np.float32)


def load_text(path: PathLike, ctx: Context) -> Bert:
    """A BERT-family encoder from a save_pretrained folder (or its model.safetensors) with
    config.json beside it, and the tokenizer beside it when there is one."""
    out, err = c_void_p(), c_void_p()
    h = ctx._enter()
    try:
        raise_from(api.pgd_bert_load(h, os.fsencode(path), byref(out), byref(err)), err)
        model = out.value
    finally:
        ctx._exit()
    try:
        tok: Optional[Tokenizer] = Tokenizer.beside(path)
    except NotFoundError:
        tok = None
    return Bert(ctx, model, tok)
