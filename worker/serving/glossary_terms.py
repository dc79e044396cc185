"""A glossary's terms in a model's translations, for every route that translates (translate, file translations,
evaluations): the glossary compiled for the model, and the results with its terms written in (model/decode/glossary.py).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict
from typing import Any

import torch

from app.db.glossary_tables import Glossary as GlossaryRow
from app.db.session import session_scope
from model.decode.glossary import HOW, Glossary, apply_glossary
from worker.serving.errors import RequestError
from worker.serving.model_cache import LoadedModel


def compiled_glossary(loaded: LoadedModel, glossary: dict[str, Any]) -> Glossary:
    """The request's glossary compiled; 422 for a target term longer than the model can write."""
    limit = loaded.model.config.max_positions - 1  # room for </s>
    for _, target in glossary["entries"]:
        n = len(loaded.tokenizer.encode(target))
        if n > limit:
            raise RequestError(422, f"glossary term {target[:60]!r} has {n} tokens, more than this model's {limit}")
    return Glossary([tuple(e) for e in glossary["entries"]], glossary.get("case_sensitive", False))


def with_terms(
    loaded: LoadedModel, terms: Glossary, sources: list[str], results: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Each result with its source's glossary terms written in (model/decode/glossary.py) and `glossary_terms`
    saying how each was; the confidence and token probabilities stay those of the model's own translation."""
    out = []
    with torch.inference_mode():
        for source, result in zip(sources, results, strict=True):
            text, applied = apply_glossary(loaded.model, loaded.tokenizer, source, result["text"], terms)
            out.append({**result, "text": text, "glossary_terms": [asdict(a) for a in applied]})
    return out


def stored_glossary(glossary_id: str) -> dict[str, Any]:
    """A background translation's glossary as it is now ({"entries", "case_sensitive"}); 422 once it is deleted."""
    with session_scope() as session:
        row = session.get(GlossaryRow, glossary_id)
        if row is None:
            raise RequestError(422, f"glossary {glossary_id} was deleted after the request named it; ask again")
        return {"entries": row.entries, "case_sensitive": row.case_sensitive}


def term_counts(results: list[dict[str, Any]]) -> dict[str, int]:
    """How many glossary terms the results met, and how each got into its translation."""
    counts = Counter(term["how"] for result in results for term in result.get("glossary_terms", []))
    return {"terms": sum(counts.values()), **{how: counts.get(how, 0) for how in HOW}}
