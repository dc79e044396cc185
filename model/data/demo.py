"""Synthetic tasks with known answers: sanity checks for learning, and demo data for new users.

python -m model.data.demo OUTPUT_DIR   # writes the demo corpora and prints their paths
"""

from __future__ import annotations

import argparse
import json
import random
import string
from collections.abc import Sequence
from pathlib import Path

from num2words import num2words


def _symbols(k: int) -> list[str]:
    letters = list(string.ascii_lowercase)
    pool = letters + [a + b for a in letters for b in letters]
    if not 1 <= k <= len(pool):
        raise ValueError(f"vocab={k} must be in [1, {len(pool)}]")
    return pool[:k]


def reverse_task(
    n: int, vocab: int | Sequence[str] = 20, min_len: int = 3, max_len: int = 10, seed: int = 0
) -> list[tuple[str, str]]:
    """Pairs ("a c b", "b c a"): random space-separated symbols and their reversal."""
    symbols = _symbols(vocab) if isinstance(vocab, int) else list(vocab)
    if not 1 <= min_len <= max_len:
        raise ValueError(f"need 1 <= min_len={min_len} <= max_len={max_len}")
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        seq = rng.choices(symbols, k=rng.randint(min_len, max_len))
        pairs.append((" ".join(seq), " ".join(reversed(seq))))
    return pairs


def split_numbers(low: int = 0, high: int = 999, held_out: float = 0.1, seed: int = 0) -> tuple[list[int], list[int]]:
    """Disjoint (train, held-out) lists covering [low, high]; held_out is the held-out fraction."""
    if low > high or not 0.0 <= held_out < 1.0:
        raise ValueError(f"need low={low} <= high={high} and 0 <= held_out={held_out} < 1")
    numbers = list(range(low, high + 1))
    random.Random(seed).shuffle(numbers)
    k = round(held_out * len(numbers))
    return sorted(numbers[k:]), sorted(numbers[:k])


def numbers_to_words_task(
    n: int,
    seed: int = 0,
    lang_src: str = "en",
    lang_tgt: str = "de",
    low: int = 0,
    high: int = 999,
    numbers: Sequence[int] | None = None,
) -> list[tuple[str, str]]:
    """Pairs ("three hundred and twelve", "dreihundertzwölf") from num2words.

    Numbers are drawn from `numbers` (e.g. one side of split_numbers) or [low, high]: without replacement
    when n fits, with replacement otherwise.
    """
    pool = list(numbers) if numbers is not None else list(range(low, high + 1))
    if not pool:
        raise ValueError("no numbers to draw from")
    rng = random.Random(seed)
    drawn = rng.sample(pool, n) if n <= len(pool) else rng.choices(pool, k=n)
    return [(num2words(x, lang=lang_src), num2words(x, lang=lang_tgt)) for x in drawn]


# noun -> (plural, verb singular, verb plural): each animal has one sound, so a masked verb is known from the
# noun and its number, and a masked noun from the verb's form.
ANIMALS = {
    "dog": ("dogs", "barks", "bark"),
    "cat": ("cats", "meows", "meow"),
    "bird": ("birds", "sings", "sing"),
    "cow": ("cows", "moos", "moo"),
    "frog": ("frogs", "croaks", "croak"),
    "duck": ("ducks", "quacks", "quack"),
    "lion": ("lions", "roars", "roar"),
    "bee": ("bees", "buzzes", "buzz"),
    "horse": ("horses", "neighs", "neigh"),
    "snake": ("snakes", "hisses", "hiss"),
}
DETERMINERS = {False: ("the", "a", "one", "this", "that"), True: ("the", "two", "some", "these", "those")}
ADJECTIVES = ("big", "small", "little", "happy", "brown", "lazy", "young", "quiet")  # consonant-initial: "a big"
PLACES = ("in the garden", "at night", "every morning", "near the river", "on the farm", "after dinner")


def _grammar_parts(rng: random.Random) -> tuple[str, str, str, str, str]:
    plural = rng.random() < 0.5
    noun = rng.choice(sorted(ANIMALS))
    plural_noun, verb_sg, verb_pl = ANIMALS[noun]
    return (
        rng.choice(DETERMINERS[plural]),
        rng.choice(ADJECTIVES),
        plural_noun if plural else noun,
        verb_pl if plural else verb_sg,
        rng.choice(PLACES),
    )


def grammar_sentences(n: int, seed: int = 0) -> list[str]:
    """Sentences "{det} {adj} {noun} {verb} {place}" with number agreement and fixed noun-verb pairs."""
    rng = random.Random(seed)
    return [" ".join(_grammar_parts(rng)) for _ in range(n)]


def grammar_cloze(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """(sentence with one "<mask>", answer): the masked verb or noun is fixed by the rest of the sentence."""
    rng = random.Random(seed)
    items = []
    for _ in range(n):
        det, adj, noun, verb, place = _grammar_parts(rng)
        if rng.random() < 0.5:
            items.append((f"{det} {adj} {noun} <mask> {place}", verb))
        else:
            items.append((f"{det} {adj} <mask> {verb} {place}", noun))
    return items


def _write_jsonl(path: Path, pairs: Sequence[tuple[str, str]]) -> None:
    path.write_text(
        "".join(json.dumps({"source": s, "target": t}, ensure_ascii=False) + "\n" for s, t in pairs), encoding="utf-8"
    )


def write_demo_files(directory: str | Path, seed: int = 0) -> dict[str, Path]:
    """Write the demo corpora into directory and return {name: path}.

    translation_train/valid: English -> German number words (JSONL) on disjoint numbers of 0-999;
    thousands_train/test: the same for 1000-1999 (a second domain to fine-tune on and score); reverse_train/valid:
    the reversal task (TSV); monolingual: grammar sentences for fill-mask (one a line).
    """
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    train_numbers, valid_numbers = split_numbers(0, 999, held_out=0.1, seed=seed)
    paths = {
        "translation_train": out / "numbers_en_de_train.jsonl",
        "translation_valid": out / "numbers_en_de_valid.jsonl",
        "thousands_train": out / "thousands_en_de_train.jsonl",
        "thousands_test": out / "thousands_en_de_test.jsonl",
        "reverse_train": out / "reverse_train.tsv",
        "reverse_valid": out / "reverse_valid.tsv",
        "monolingual": out / "grammar_sentences.txt",
    }
    _write_jsonl(paths["translation_train"], numbers_to_words_task(len(train_numbers), seed, numbers=train_numbers))
    _write_jsonl(paths["translation_valid"], numbers_to_words_task(len(valid_numbers), seed, numbers=valid_numbers))
    thousands_train, thousands_test = split_numbers(1000, 1999, held_out=0.1, seed=seed)
    _write_jsonl(paths["thousands_train"], numbers_to_words_task(len(thousands_train), seed, numbers=thousands_train))
    _write_jsonl(paths["thousands_test"], numbers_to_words_task(len(thousands_test), seed, numbers=thousands_test))
    reverse_train = reverse_task(2000, seed=seed)
    seen = {s for s, _ in reverse_train}
    reverse_valid = [p for p in reverse_task(250, seed=seed + 1) if p[0] not in seen][:200]  # held out
    for name, pairs in (("reverse_train", reverse_train), ("reverse_valid", reverse_valid)):
        paths[name].write_text("".join(f"{s}\t{t}\n" for s, t in pairs), encoding="utf-8")
    paths["monolingual"].write_text("\n".join(grammar_sentences(2000, seed)) + "\n", encoding="utf-8")
    return paths


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m model.data.demo", description="Write the demo corpora.")
    parser.add_argument("output_dir", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    for name, path in write_demo_files(args.output_dir, args.seed).items():
        print(f"{name}\t{path}")


if __name__ == "__main__":
    main()
