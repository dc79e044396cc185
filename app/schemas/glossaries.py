"""Schemas of glossaries: an organisation's terms for one language pair (app/services/glossaries.py checks them)."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field, model_validator

from app.schemas.common import Input, Language, Output

MAX_TERM_CHARS = 200  # a term longer than this is a sentence, not a term
MAX_ENTRIES = 10_000
MAX_CSV_CHARS = 2_000_000
MAX_TBX_CHARS = 10_000_000  # XML is verbose; the body limit (MAX_BODY_KB) binds first by default


class GlossaryEntry(Input):
    source: str = Field(min_length=1, max_length=MAX_TERM_CHARS)
    target: str = Field(min_length=1, max_length=MAX_TERM_CHARS)


class GlossaryCreate(Input):
    """A glossary from `entries`, from `csv` (two columns, source and target, a row each; a first row
    `source,target` is a header and skipped), or from `tbx` (a TermBase eXchange document: of each term entry, the
    terms in the glossary's two languages); exactly one of the three."""

    name: str = Field(min_length=1, max_length=200)
    source_language: Language
    target_language: Language
    case_sensitive: bool = Field(
        False,
        description="false: a source term matches whatever its case, and two sources differing only by case "
        "are the same term",
    )
    entries: list[GlossaryEntry] | None = Field(None, max_length=MAX_ENTRIES)
    csv: str | None = Field(None, min_length=1, max_length=MAX_CSV_CHARS, description="source,target rows")
    tbx: str | None = Field(
        None, min_length=1, max_length=MAX_TBX_CHARS, description="a TBX document (TBX-Basic, ISO 30042) as text"
    )

    @model_validator(mode="after")
    def _one_source(self) -> GlossaryCreate:
        if sum(terms is not None for terms in (self.entries, self.csv, self.tbx)) != 1:
            raise ValueError("give the terms as `entries`, `csv` or `tbx`, one of the three")
        return self


class GlossarySummary(Output):
    id: str
    name: str
    source_language: str
    target_language: str
    case_sensitive: bool
    terms: int = Field(description="how many entries it holds")
    created_at: datetime


class GlossaryPublic(GlossarySummary):
    entries: list[GlossaryEntry]
