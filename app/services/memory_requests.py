"""What the API checks of a translate request's `memory` before a worker builds or reads it: the dataset is the
caller's, parallel, parsed, in the model's languages where both say theirs; and the key may read datasets, since
the matches show the dataset's rows."""

from __future__ import annotations

from sqlalchemy.orm import Session

from app.core.scopes import Scope
from app.db.keys import Caller
from app.db.tables import Dataset
from app.schemas.inference import MemoryRequest
from app.services.datasets import require_ready
from app.services.errors import Forbidden, InvalidField

FIELD = "memory.dataset_id"


def check_memory(
    session: Session, caller: Caller, memory: MemoryRequest, languages: tuple[str | None, str | None]
) -> None:
    """403 unless the key holds `read`; 422 for a dataset that is not the caller's (named as not found), not
    parallel, failed, or in other languages than the model's (source, target); 409 while it is being parsed."""
    if Scope.READ not in caller.scopes:
        raise Forbidden(
            f"API key {caller.prefix}... lacks scope 'read', which a translation memory needs: its matches show the "
            f"rows of dataset {memory.dataset_id}"
        )
    dataset = session.get(Dataset, memory.dataset_id)
    if dataset is None or dataset.owner_id != caller.owner_id:
        raise InvalidField(FIELD, f"dataset {memory.dataset_id} not found")
    if dataset.kind != "parallel":
        raise InvalidField(FIELD, f"dataset {dataset.id} is {dataset.kind}: a translation memory needs a parallel one")
    require_ready(dataset, FIELD)
    for side, model_language, dataset_language in zip(
        ("source", "target"), languages, (dataset.source_language, dataset.target_language)
    ):
        if model_language and dataset_language and model_language != dataset_language:
            raise InvalidField(
                FIELD,
                f"dataset {dataset.id}'s {side} language is {dataset_language}, the model's {model_language}: a "
                "memory in other languages would match nothing useful",
            )
