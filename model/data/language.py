"""The language of a sentence, by py3langid, and the rule that says a side is *not* in its declared language.

py3langid (a maintained fork of langid.py: a naive Bayes model over byte n-grams, 97 languages) with normalised
probabilities. In 0.4.0 these are a softmax of the class scores at a temperature of sqrt(bytes), so even clean
text rarely gets a probability near 1 and a plain threshold on it mislabels much: on the target side of the en-fr
gettext corpus (bench/corpus.py), calling every sentence whose top language is not French "wrong" flags 7% of a
clean corpus (short UI strings read as Latin, Pidgin, Italian...), while requiring a probability of 0.5 misses 20%
of German sentences. The rule here compares the declared language with the winner instead:

    wrong  <=>  the text has MIN_CHARS characters or more (stripped), and
                P(top language) >= ODDS * P(declared language)

i.e. the identifier finds another language at least ten times likelier than the declared one. On the en-fr gettext
corpus (sides of 20+ characters, copies left out) it flags 0.65% of the French targets and 1% of the English
sources (mostly code-like strings: "for NAME [in WORDS ... ]", "syntax error: `((%s))'"), and finds 97% of German
and 95% of Spanish sentences put in the targets' place; odds of 100 would flag 0.1% and 0.2% but find 89% and 81%.
Shorter texts are not judged (they are counted as skipped): judging from 10 characters up would triple the false
alarms (2% of the French targets, 3% of the English sources) for a few points of recall.

Speed, measured on this machine's CPU (one core, py3langid 0.4.0): about 24,000 sentences a second for
`classify` on gettext sentences of 50 characters on average; `rank` (needed for P(declared) when another
language wins, for about one sentence in ten of a clean corpus) about 13,000 a second.

OpusFilter's LangidFilter (and the deprecated LanguageIDFilter) cannot be used with the pinned py3langid 0.4.0:
they call `LanguageIdentifier.from_pickled_model`, which 0.4.0 removed (it is `from_model_file`); they would also
judge texts of any length and compare a rounded probability with a threshold.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

MIN_CHARS = 20
ODDS = 10.0
_CODE_SEPARATORS = re.compile(r"[-_@.]")


@functools.cache
def _identifier() -> Any:
    """py3langid's model, loaded once per process (0.7 s)."""
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


def known_languages() -> frozenset[str]:
    """The codes py3langid can answer (ISO 639-1, e.g. "en", "fr", "zh")."""
    return frozenset(_identifier().labels)


def language_code(declared: str) -> str:
    """The ISO 639-1 part of a declared language: "fr", "fr-CA", "pt_BR", "sr@latin" and "FR" give "fr", "pt"..."""
    return _CODE_SEPARATORS.split(declared.strip().lower(), maxsplit=1)[0]


@dataclass(frozen=True)
class Identification:
    language: str  # py3langid's best guess
    probability: float  # its normalised probability
    wrong: bool  # True when a declared language was given and this text is judged not to be in it


@dataclass(frozen=True)
class LanguageCheck:
    """Identifies texts and judges them against a declared language by the rule of the module docstring."""

    min_chars: int = MIN_CHARS
    odds: float = ODDS

    def __post_init__(self) -> None:
        if self.min_chars < 1:
            raise ValueError(f"min_chars={self.min_chars} must be at least 1")
        if not self.odds > 1:
            raise ValueError(f"odds={self.odds} must be greater than 1 (the winner against the declared language)")

    def identify(self, text: str, declared: str | None = None) -> Identification | None:
        """py3langid's answer for `text`, judged against `declared` (an ISO 639-1 code py3langid knows); None for
        a text shorter than min_chars, which is not judged."""
        text = text.strip()
        if len(text) < self.min_chars:
            return None
        identifier = _identifier()
        language, probability = identifier.classify(text)
        wrong = False
        if declared is not None and language != declared:
            declared_probability = dict(identifier.rank(text)).get(declared, 0.0)
            wrong = probability >= self.odds * declared_probability
        return Identification(language, float(probability), wrong)
