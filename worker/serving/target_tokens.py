"""A model of several pairs translates into the language whose token begins each source (>>fr<<: Johnson et al.,
2017; model/data/language_pairs.py): the check that its tokenizer holds that token, and the sources tagged with it.
The interactive route and the background work (files, evaluations, datasets) share them."""

from __future__ import annotations

from model.data.language_pairs import tag_source
from worker.serving.errors import RequestError
from worker.serving.model_cache import LoadedModel


def check_target(loaded: LoadedModel, target: str | None) -> None:
    """RequestError(422) naming the tokens held when `target` is given and the model's tokenizer has no token for it."""
    if target is not None and target not in loaded.tokenizer.language_tokens:
        held = ", ".join(sorted(loaded.tokenizer.language_tokens)) or "none: it was trained on one pair"
        raise RequestError(422, f"model {loaded.model_id} has no token for target language {target!r} ({held})")


def tagged(texts: list[str], target: str | None) -> list[str]:
    """The texts as the model reads them: each after the target's token, or as they are for a model of one pair."""
    return texts if target is None else [tag_source(text, target) for text in texts]
