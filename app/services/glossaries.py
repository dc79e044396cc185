"""Glossaries as an organisation stores them: the terms read from a request (entries, CSV or TBX), checked, and kept.

A glossary is refused (422 naming the problem) when it holds no term, a term that is empty once its spaces are
collapsed or longer than MAX_TERM_CHARS, a CSV row that is not two columns, or one source (under the glossary's
case rule) with two different targets. The same entry twice is kept once.
"""

from __future__ import annotations

import csv
import io

from sqlalchemy.orm import Session

from app.db.glossary_tables import Glossary
from app.schemas.glossaries import MAX_ENTRIES, MAX_TERM_CHARS, GlossaryCreate
from app.services.errors import InvalidField

HEADER = ("source", "target")


def parse_csv(text: str) -> list[tuple[str, str]]:
    """The (source, target) rows of a CSV text; a first row `source,target` is a header."""
    rows = list(csv.reader(io.StringIO(text)))
    if rows and tuple(c.strip().lower() for c in rows[0]) == HEADER:
        rows = rows[1:]
    pairs = []
    for line, row in enumerate(rows, start=1):
        if not any(c.strip() for c in row):
            continue  # a blank line
        if len(row) != 2:
            raise InvalidField("csv", f"row {line} has {len(row)} columns, not 2 (source,target): {row[:3]!r}")
        pairs.append((row[0], row[1]))
    return pairs


def _primary(language: str | None) -> str:
    """A language tag's primary subtag, lowercase: en-US and EN are en."""
    return (language or "").replace("_", "-").split("-")[0].lower()


def parse_tbx(text: str, source_language: str, target_language: str) -> list[tuple[str, str]]:
    """The (source, target) terms of a TBX document (TermBase eXchange, ISO 30042; read by the Translate Toolkit's
    parser, which resolves no XML entity): of each term entry, the first term of a language set in each of the
    glossary's languages (by primary subtag: en-US is en); entries lacking either language are skipped."""
    from lxml.etree import XMLSyntaxError
    from translate.misc.xml_helpers import getXMLlang
    from translate.storage.tbx import tbxfile

    try:
        store = tbxfile.parsestring(text.encode("utf-8"))  # type: ignore[no-untyped-call]  # the toolkit is untyped
    except (XMLSyntaxError, AssertionError, ValueError) as exc:  # not XML; XML whose root is not <martif>
        detail = str(exc) or "its root element is not <martif>"
        raise InvalidField("tbx", f"not a TBX document: {detail}") from exc
    wanted, pairs, seen = (_primary(source_language), _primary(target_language)), [], set()
    for unit in store.units:
        terms: dict[str, str] = {}
        for node in unit.getlanguageNodes():
            language, term = _primary(getXMLlang(node)), unit.getNodeText(node)  # type: ignore[no-untyped-call]
            if language and term and term.strip():
                terms.setdefault(language, term)
                seen.add(language)
        if all(language in terms for language in wanted):
            pairs.append((terms[wanted[0]], terms[wanted[1]]))
    if not pairs:
        found = ", ".join(sorted(seen)) or "none"
        raise InvalidField(
            "tbx", f"no term entry has terms in both {source_language} and {target_language} (languages found: {found})"
        )
    return pairs


def checked_terms(pairs: list[tuple[str, str]], case_sensitive: bool, field: str) -> list[list[str]]:
    """The terms, spaces collapsed, each distinct entry once, in their first order; InvalidField for an empty
    glossary, an empty or overlong term, or a source with two targets."""
    terms: dict[str, tuple[str, str]] = {}
    for source, target in pairs:
        source, target = " ".join(source.split()), " ".join(target.split())
        for side, term in (("source", source), ("target", target)):
            if not term:
                raise InvalidField(field, f"an entry has an empty {side} term: {(source, target)!r}")
            if len(term) > MAX_TERM_CHARS:
                raise InvalidField(
                    field, f"{side} term {term[:40]!r}... has {len(term)} characters, more than {MAX_TERM_CHARS}"
                )
        key = source if case_sensitive else source.casefold()
        if key in terms and terms[key][1] != target:
            raise InvalidField(
                field,
                f"conflicting entries for {source!r}: {terms[key][1]!r} and {target!r}"
                + ("" if case_sensitive else " (the glossary is not case-sensitive)"),
            )
        terms.setdefault(key, (source, target))
    if not terms:
        raise InvalidField(field, "the glossary has no entry")
    if len(terms) > MAX_ENTRIES:
        raise InvalidField(field, f"{len(terms)} entries, more than {MAX_ENTRIES}")
    return [list(pair) for pair in terms.values()]


def create(session: Session, owner_id: str, body: GlossaryCreate) -> Glossary:
    if body.csv is not None:
        pairs, field = parse_csv(body.csv), "csv"
    elif body.tbx is not None:
        pairs, field = parse_tbx(body.tbx, body.source_language, body.target_language), "tbx"
    else:
        pairs, field = [(e.source, e.target) for e in body.entries or []], "entries"
    glossary = Glossary(
        owner_id=owner_id,
        name=body.name,
        source_language=body.source_language,
        target_language=body.target_language,
        case_sensitive=body.case_sensitive,
        entries=checked_terms(pairs, body.case_sensitive, field),
    )
    session.add(glossary)
    return glossary


def for_translation(
    session: Session, owner_id: str, glossary_id: str, languages: tuple[str | None, str | None]
) -> dict[str, object]:
    """What a translate request sends the worker of the glossary it names: {"entries", "case_sensitive"}; 422 for
    one that is not the caller's (named as not found) or whose pair is not the model's where the model says its."""
    glossary = session.get(Glossary, glossary_id)
    if glossary is None or glossary.owner_id != owner_id:
        raise InvalidField("glossary_id", f"glossary {glossary_id} not found")
    pair = (glossary.source_language, glossary.target_language)
    for side, model_language, language in zip(("source", "target"), languages, pair):
        if model_language and model_language != language:
            raise InvalidField(
                "glossary_id",
                f"glossary {glossary_id} is {pair[0]}-{pair[1]}, but the model's {side} language is {model_language}",
            )
    return {"entries": glossary.entries, "case_sensitive": glossary.case_sensitive}
