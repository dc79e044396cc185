"""The languages of one side of a corpus, identified on a systematic sample of its rows (the data report's
`sides.<side>.language`, model/data/report.py)."""

from __future__ import annotations

from array import array
from collections import Counter
from typing import Any

from model.data.language import Identification, LanguageCheck, known_languages, language_code

LANGUAGE_SAMPLE = 200_000  # rows identified at most; at ~24,000 sides a second, about 17 s for two sides
TOP_LANGUAGES = 10


class LanguageSample:
    """Languages of every k-th row of one side, k doubling whenever LANGUAGE_SAMPLE rows have been kept.

    Halving the kept rows (those whose row number is a multiple of 2k stay) keeps a deterministic systematic
    sample of the whole stream without knowing its length in advance. Kept in arrays: 11 bytes a row."""

    def __init__(self, declared: str | None, check: LanguageCheck, cap: int) -> None:
        code = language_code(declared) if declared else None
        self.declared = declared
        self.known = code is not None and code in known_languages()
        self.code = code if self.known else None
        self.check = check
        self.cap = cap
        self.every = 1
        self._labels: dict[str, int] = {}  # language -> its index in _language
        self._row = array("Q")  # row number (0-based) of each kept row
        self._language = array("h")  # index into _labels, -1 when the text was too short to judge
        self._wrong = array("B")  # 1 when judged not the declared language

    def wants(self, row: int) -> bool:
        return row % self.every == 0

    def add(self, row: int, text: str, copy: bool) -> Identification | None:
        found = self.check.identify(text, None if copy else self.code)
        self._row.append(row)
        self._language.append(self._labels.setdefault(found.language, len(self._labels)) if found else -1)
        self._wrong.append(bool(found and found.wrong))
        if len(self._row) > self.cap:
            self.every *= 2
            stay = [i for i, r in enumerate(self._row) if r % self.every == 0]
            self._row = array("Q", (self._row[i] for i in stay))
            self._language = array("h", (self._language[i] for i in stay))
            self._wrong = array("B", (self._wrong[i] for i in stay))
        return found

    def judge(self, text: str) -> bool | None:
        """Whether `text` is judged another language than the declared one; None when it cannot be judged (too
        short, or no declared language py3langid knows)."""
        if self.code is None:
            return None
        found = self.check.identify(text, self.code)
        return None if found is None else found.wrong

    def identified(self) -> int:
        return len(self._language) - self._language.count(-1)

    def wrong_count(self) -> int:
        return sum(self._wrong)

    def summary(self) -> dict[str, Any]:
        names = {i: language for language, i in self._labels.items()}
        counts = Counter(names[i] for i in self._language if i >= 0)
        identified = self.identified()
        return {
            "declared": self.declared,
            "known": self.known,
            "identified": identified,
            "skipped_short": len(self._language) - identified,
            "sampled": self.every > 1,
            "sample_every": self.every,
            "min_chars": self.check.min_chars,
            "odds": self.check.odds,
            "detected": [
                {"language": lang, "count": n, "share": round(n / identified, 6)}
                for lang, n in counts.most_common(TOP_LANGUAGES)
            ],
        }
