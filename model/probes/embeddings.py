"""Embeddings over training: where the most frequent tokens sit, and which tokens are closest to a few of them.

The shared embedding matrix E (Sec. 3.4) is trained like every other weight: tokens that occur in the same contexts
get similar gradients and drift together. At each checkpoint an `EmbeddingProbe` records

    points     a 2-D projection (PCA) of the embeddings of the `cloud` most frequent tokens, each record rotated
               onto the previous one (orthogonal Procrustes), so a token's movement between records is its own and
               not a flip or turn of the principal axes
    explained  the share of the cloud's variance each of the two axes keeps
    neighbors  for each watched token (chosen by the user, else the most frequent words), its nearest tokens by
               cosine similarity in E (specials left out)
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from model.data.batching import Example, ids_list
from model.data.special_tokens import SPECIAL_TOKENS
from model.data.tokenizer import Tokenizer, readable_token
from model.nn.transformer import Transformer

CLOUD_TOKENS = 200  # tokens in the 2-D projection
WATCHED_TOKENS = 8  # tokens whose neighbours are recorded when the user chose none
NEIGHBORS = 5
COUNTED_EXAMPLES = 20_000  # examples counted to find the most frequent tokens
_BYTE_SPELLING = re.compile(r"<0x[0-9A-F]{2}>")  # a byte piece, or a byte of a partial character


@dataclass(frozen=True)
class EmbeddingRecord:
    step: int
    tokens: list[str]  # the cloud, most frequent first (readable: "▁word")
    ids: list[int]
    points: list[list[float]]  # (len(tokens), 2)
    explained: list[float]  # variance share of each axis
    neighbors: dict[str, list[list[Any]]]  # watched token -> [[token, similarity], ...], closest first
    kind: str = "embeddings"

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "step": self.step,
            "groups": [[t, i, None] for t, i in zip(self.tokens, self.ids, strict=True)],
            "points": self.points,
            "explained": self.explained,
            "neighbors": self.neighbors,
        }


def _letters(token: str) -> int:
    """Letters in a readable token, bytes spelled "<0xC3>" not counted."""
    return sum(c.isalpha() for c in _BYTE_SPELLING.sub("", token))


def frequent_ids(examples: Sequence[Example], n: int, words_only: bool, tokenizer: Tokenizer) -> list[int]:
    """The n most frequent non-special token ids of the examples' sources and targets (ties by id); words_only
    keeps tokens with a letter in them (no punctuation, digits or byte pieces)."""
    counts: Counter[int] = Counter()
    for e in examples[:COUNTED_EXAMPLES]:
        counts.update(ids_list(e.src_ids))  # Python ints: NumPy's would reach the tokenizer as keys
        counts.update(ids_list(e.tgt_ids))
    ranked = sorted((i for i in counts if i >= len(SPECIAL_TOKENS)), key=lambda i: (-counts[i], i))
    if words_only:
        ranked = [i for i in ranked if _letters(readable_token(tokenizer.id_to_token(i))) >= 2]
    return ranked[:n]


def _procrustes(points: Tensor, previous: Tensor) -> Tensor:
    """points rotated (or reflected) onto previous: the orthogonal R minimising ||points R - previous||."""
    u, _, vt = torch.linalg.svd(points.T @ previous)  # (2, 2)
    rotated: Tensor = points @ (u @ vt)
    return rotated


class EmbeddingProbe:
    def __init__(self, tokenizer: Tokenizer, examples: Sequence[Example], watched: Sequence[int] = ()) -> None:
        self.tokenizer = tokenizer
        self.cloud = frequent_ids(examples, CLOUD_TOKENS, False, tokenizer)
        self.watched = (
            list(watched)
            or frequent_ids(examples, WATCHED_TOKENS, True, tokenizer)
            or frequent_ids(examples, WATCHED_TOKENS, False, tokenizer)  # a corpus without words: any tokens
        )
        self.previous: Tensor | None = None

    def _name(self, i: int) -> str:
        return readable_token(self.tokenizer.id_to_token(i))

    @torch.no_grad()
    def record(self, model: Transformer, step: int) -> EmbeddingRecord:
        weight = model.encoder.embed_tokens.weight.detach().float().cpu()  # (V, d_model): shared when tied
        cloud = weight[self.cloud]  # (n, d_model)
        centred = cloud - cloud.mean(dim=0)
        _, s, vt = torch.linalg.svd(centred, full_matrices=False)  # principal axes, largest first
        points = centred @ vt[:2].T  # (n, 2)
        if self.previous is not None and self.previous.shape == points.shape:
            points = _procrustes(points, self.previous)
        self.previous = points
        variance = s.square()
        unit = F.normalize(weight, dim=-1)
        neighbors = {}
        for i in self.watched:
            sims = unit @ unit[i]  # (V,)
            sims[i] = float("-inf")
            sims[: len(SPECIAL_TOKENS)] = float("-inf")
            top = sims.topk(min(NEIGHBORS, sims.numel() - len(SPECIAL_TOKENS) - 1))
            neighbors[self._name(i)] = [
                [self._name(j), round(v, 4)] for j, v in zip(top.indices.tolist(), top.values.tolist(), strict=True)
            ]
        return EmbeddingRecord(
            step=step,
            tokens=[self._name(i) for i in self.cloud],
            ids=list(self.cloud),
            points=[[round(x, 5), round(y, 5)] for x, y in points.tolist()],
            explained=[round(float(v / variance.sum()), 5) for v in variance[:2]],
            neighbors=neighbors,
        )
