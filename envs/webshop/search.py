"""BM25 (Okapi) keyword search over product texts: the substitute for WebShop's Lucene index."""
from __future__ import annotations

import math
import re

import numpy as np

_TOKEN = re.compile(r"[a-z0-9]+")


def tokenize(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


class BM25Index:
    """Inverted index (term -> doc ids, term frequencies) in flat numpy arrays; `top()` ranks by
    the summed BM25 weights of the query's distinct terms, ties broken by doc order."""

    def __init__(self, docs: list[str], k1: float = 1.5, b: float = 0.75):
        self.k1, self.b = k1, b
        self.n_docs = len(docs)
        vocab: dict[str, int] = {}
        term_ids: list[int] = []
        lengths = np.zeros(self.n_docs, dtype=np.int64)
        for i, doc in enumerate(docs):
            toks = _TOKEN.findall(doc.lower())
            lengths[i] = len(toks)
            term_ids.extend(vocab.setdefault(t, len(vocab)) for t in toks)
        doc_ids = np.repeat(np.arange(self.n_docs, dtype=np.int64), lengths)
        keys, tf = np.unique(np.asarray(term_ids, dtype=np.int64) * self.n_docs + doc_ids,
                             return_counts=True)                     # sorted by (term, doc)
        self._terms = keys // self.n_docs
        self._docs = (keys % self.n_docs).astype(np.int32)
        self._tf = tf.astype(np.float32)
        self._bounds = np.searchsorted(self._terms, np.arange(len(vocab) + 1))
        self._vocab = vocab
        avgdl = float(lengths.mean()) if self.n_docs else 1.0
        self._norm = (k1 * (1.0 - b + b * lengths / max(avgdl, 1e-6))).astype(np.float32)

    def scores(self, query: str) -> np.ndarray:
        out = np.zeros(self.n_docs, dtype=np.float32)
        for t in dict.fromkeys(tokenize(query)):
            tid = self._vocab.get(t)
            if tid is None:
                continue
            lo, hi = self._bounds[tid], self._bounds[tid + 1]
            ids, tf = self._docs[lo:hi], self._tf[lo:hi]
            df = hi - lo
            idf = math.log(1.0 + (self.n_docs - df + 0.5) / (df + 0.5))
            out[ids] += idf * tf * (self.k1 + 1.0) / (tf + self._norm[ids])
        return out

    def top(self, query: str, n: int) -> list[int]:
        """Ids of the best `n` documents with a positive score, best first."""
        s = self.scores(query)
        pos = np.flatnonzero(s > 0)
        if pos.size == 0:
            return []
        order = np.lexsort((pos, -s[pos]))     # score desc, then doc id asc
        return pos[order[:n]].tolist()
