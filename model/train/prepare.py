"""Raw rows to training input: a tokenizer trained on the training rows, the model config, and examples
(translation pairs, or denoising sentences re-noised every epoch), with a validation set held out if none is
given; or, to fine-tune, the same data starting from an existing model (start_from)."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from itertools import zip_longest
from typing import Any, cast

import numpy as np
from torch import Tensor

from model.data.batching import Example, LengthReport, Overlong
from model.data.example_store import ExampleStore
from model.data.language_pairs import DEFAULT_TEMPERATURE, epoch_indices, rows_per_pair, untagged
from model.data.objectives import encode_sentences, make_translation_examples, noise_examples, renoising, total_report
from model.data.text_rows import Subset
from model.data.tokenizer import MIN_VOCAB_SIZE, Tokenizer
from model.io.checkpoint import OBJECTIVES
from model.nn.config import ModelConfig
from model.nn.transformer import Transformer
from model.train.config import TrainingError
from model.train.settings import DataSettings
from model.train.shrink import shrunk_state

# What start_from may change: regularisation, and fewer layers (a subset of the model's)
START_FROM_MAY_CHANGE = ("dropout", "attention_dropout", "n_encoder_layers", "n_decoder_layers")


@dataclass
class PreparedData:
    """Everything train() needs besides the TrainConfig; stats is plain numbers for the job record."""

    objective: str
    tokenizer: Tokenizer
    model_config: ModelConfig
    # an ExampleStore (model/data/example_store.py); denoising: a function of the epoch (fresh noise every epoch)
    train_examples: Sequence[Example] | Callable[[int], Sequence[Example]]
    valid_examples: list[Example]
    stats: dict[str, int]
    init_state: dict[str, Tensor] | None = None  # weights to start from (start_from); None: initialised afresh
    valid_groups: list[str] = field(default_factory=list)  # several pairs: each validation example's pair


def start_from(data: PreparedData, model: Transformer, **changes: Any) -> PreparedData:
    """The same data, trained from `model`'s weights and architecture (fine-tuning, continued training).

    data must have been prepared with that model's tokenizer; `changes` may alter its dropout rates (they hold no
    weights) and lower n_encoder_layers and n_decoder_layers: the model then starts from a spread subset of the
    layers (model/train/shrink.py, "shrink and fine-tune"). The weights are copied: training never writes into
    `model`."""
    if data.tokenizer.vocab_size != model.config.vocab_size:
        raise TrainingError(
            f"the data's tokenizer has {data.tokenizer.vocab_size} tokens but the model's embeddings "
            f"{model.config.vocab_size}: prepare it with the model's own tokenizer"
        )
    unknown = sorted(set(changes) - set(START_FROM_MAY_CHANGE))
    if unknown:
        raise TrainingError(f"starting from a model, only {', '.join(START_FROM_MAY_CHANGE)} may change, not {unknown}")
    config = replace(model.config, **changes)
    try:
        state = shrunk_state(model.state_dict(), model.config, config.n_encoder_layers, config.n_decoder_layers)
    except ValueError as exc:
        raise TrainingError(f"starting from a model: {exc}") from exc
    return replace(data, model_config=config, init_state=state)


def split_validation(rows: Sequence[Any], fraction: float, max_rows: int, seed: int) -> tuple[Sequence[Any], list[Any]]:
    """(train, valid): a random fraction of rows (at least 1, at most max_rows) held out, fixed by seed, both in
    the rows' order. A list's training rows are a list; other sequences' (TextRows on disk) a Subset view, so the
    rows are never all read into memory."""
    n = len(rows)
    if n < 2:
        raise TrainingError(
            f"need at least 2 rows to hold out a validation set, got {n}; add data or pass validation rows"
        )
    k = min(n - 1, max_rows, max(1, round(n * fraction)))
    held = sorted(random.Random(f"valid:{seed}").sample(range(n), k))
    valid = [rows[i] for i in held]
    if isinstance(rows, list):
        kept = set(held)
        return [r for i, r in enumerate(rows) if i not in kept], valid
    return Subset(rows, np.delete(np.arange(n), held)), valid


def prepare(
    objective: str,
    train_rows: Sequence[tuple[str, str]] | Sequence[str],
    valid_rows: Sequence[tuple[str, str]] | Sequence[str] | None = None,
    *,
    preset: str = "small",
    model_overrides: dict[str, Any] | None = None,
    vocab_size: int = 8000,
    settings: DataSettings | None = None,
    seed: int = 0,
    max_valid_rows: int = 1000,
    tokenizer: Tokenizer | None = None,
    mean_span: float = 3.0,
    overlong: Overlong = "drop",
    min_frequency: int = 2,
    target_languages: Sequence[str] = (),
    valid_groups: Sequence[str] = (),
    pair_sizes: Sequence[int] = (),
    pair_temperature: float = DEFAULT_TEMPERATURE,
) -> PreparedData:
    """Tokenizer, model config and examples from raw rows: (source, target) pairs for "translation",
    sentences for "denoising" (BART-style infilling: settings.noise "span" or "token" masks, redrawn every epoch).

    settings: a job's DataSettings (model/train/settings.py; None: their defaults), read under their own names.
    Without valid_rows, a validation set of settings.valid_fraction is held out of train_rows (deterministic by
    seed). The tokenizer (settings.tokenizer, normalization, prefix_space as in Tokenizer.train) is trained on the
    training rows only, unless one is given (pass the checkpoint's when resuming). Sequences longer than
    settings.max_length tokens are dropped or truncated (`overlong`). User errors raise TrainingError.
    target_languages: a model of several pairs (model/data/language_pairs.py), whose sources begin with their
    target language's token: a trained tokenizer learns the text without the tokens and gets one special token a
    language; a given one must hold them all. valid_groups: the pair of each of valid_rows ("en-fr"): the
    validation examples come interleaved pair by pair (any prefix holds every pair), valid_groups naming each one's.
    pair_sizes: train_rows are every pair's rows once, pair after pair, this many each (language_pairs.tagged_rows):
    each epoch draws its examples from them by pair_temperature (language_pairs.epoch_indices), and the tokenizer
    learns from the first epoch's rows.
    """
    settings = settings if settings is not None else DataSettings()
    max_length, noise, mask_ratio = settings.max_length, settings.noise, settings.mask_ratio
    if objective not in OBJECTIVES:
        raise TrainingError(f"objective={objective!r} must be one of {OBJECTIVES}")
    _check_rows(objective, train_rows, "train_rows")
    if valid_rows is None:
        if max_valid_rows < 1:
            raise TrainingError(f"need max_valid_rows={max_valid_rows} >= 1")
        train_rows, valid_rows = split_validation(train_rows, settings.valid_fraction, max_valid_rows, seed)
    else:
        _check_rows(objective, valid_rows, "valid_rows")
    if objective == "denoising" and mean_span <= 0:
        raise TrainingError(f"need mean_span={mean_span} > 0")
    if tokenizer is None:
        if vocab_size < MIN_VOCAB_SIZE:
            raise TrainingError(f"vocab_size={vocab_size} is below the minimum {MIN_VOCAB_SIZE}")
        # An iterator, not a list: the trainer reads it in batches, and a corpus of millions of rows need not be
        # held twice.
        texts: Iterable[str] = (
            (t for row in train_rows for t in row)
            if objective == "translation"
            else iter(cast(Sequence[str], train_rows))
        )
        if target_languages:  # the tokens are added after training, not learned from the tagged sources
            tagged = cast(Sequence[tuple[str, str]], train_rows)
            if pair_sizes:  # the text as the pairs are sampled, so a small pair's language gets its subwords
                counts = rows_per_pair(pair_sizes, pair_temperature)
                tagged = [tagged[j] for j in epoch_indices(pair_sizes, counts, seed)]
            texts = (t for source, target in tagged for t in (untagged(source), target))
        try:
            tokenizer = Tokenizer.train(
                texts, vocab_size, min_frequency, settings.tokenizer, settings.normalization, settings.prefix_space
            )
            if target_languages:
                tokenizer = tokenizer.with_language_tokens(target_languages)
        except ValueError as e:
            raise TrainingError(f"invalid tokenizer settings: {e}") from e
    missing = sorted(set(target_languages) - set(tokenizer.language_tokens)) if target_languages else []
    if missing:
        raise TrainingError(f"the tokenizer has no token for target language(s) {missing}")
    try:
        config = ModelConfig.from_preset(preset, tokenizer.vocab_size, **(model_overrides or {}))
    except ValueError as e:
        raise TrainingError(f"invalid model config: {e}") from e
    if max_length + 1 > config.max_positions:
        raise TrainingError(
            f"max_length={max_length} needs max_positions >= {max_length + 1}, got {config.max_positions}"
        )

    # _check_rows made the rows (source, target) pairs for translation and sentences otherwise
    if objective == "translation":
        pairs, valid_pairs = cast(Sequence[tuple[str, str]], train_rows), cast(Sequence[tuple[str, str]], valid_rows)
        train_examples: Sequence[Example] | Callable[[int], Sequence[Example]]
        if pair_sizes:
            train_examples, n_train, report = _pair_examples(
                pairs, pair_sizes, pair_temperature, seed, tokenizer, max_length, overlong
            )
        else:
            train, report = make_translation_examples(pairs, tokenizer, max_length, overlong)
            train_examples, n_train = train, len(train)
        valid, valid_group_names, valid_report = _valid_examples(
            valid_pairs, valid_groups, tokenizer, max_length, overlong
        )
        empty = valid_empty = 0  # _check_rows refused an empty source or target
    else:
        valid_group_names = []
        sentences, valid_sentences = cast(Sequence[str], train_rows), cast(Sequence[str], valid_rows)
        all_ids, report = encode_sentences(sentences, tokenizer, max_length, overlong)
        all_valid_ids, valid_report = encode_sentences(valid_sentences, tokenizer, max_length, overlong)
        ids = all_ids.select(all_ids.lengths > 0)  # nothing left to mask in an empty one
        valid_ids = list(all_valid_ids.select(all_valid_ids.lengths > 0))
        empty, valid_empty = len(all_ids) - len(ids), len(all_valid_ids) - len(valid_ids)
        n_train = len(ids)
        train_examples = renoising(ids, seed, noise, mask_ratio, mean_span)
        # Validation noise is drawn once (epoch -1 never occurs in training), so every evaluation is comparable.
        valid = noise_examples(valid_ids, seed, -1, noise, mask_ratio, mean_span)
    _require_examples("training", n_train, len(train_rows), report.dropped, max_length)
    _require_examples("validation", len(valid), len(valid_rows), valid_report.dropped, max_length)
    stats = {
        "train_examples": n_train,
        "valid_examples": len(valid),
        "dropped": report.dropped,
        "truncated": report.truncated,
        "valid_dropped": valid_report.dropped,
        "empty": empty,  # sentences that tokenize to nothing, dropped
        "valid_empty": valid_empty,
        "vocab_size": tokenizer.vocab_size,
    }
    return PreparedData(objective, tokenizer, config, train_examples, valid, stats, valid_groups=valid_group_names)


def _pair_examples(
    rows: Sequence[tuple[str, str]],
    sizes: Sequence[int],
    temperature: float,
    seed: int,
    tokenizer: Tokenizer,
    max_length: int,
    overlong: Overlong,
) -> tuple[Callable[[int], Sequence[Example]], int, LengthReport]:
    """A model of several pairs' training examples as a function of the epoch: every pair's rows encoded once (this
    many of each, pair after pair), and each epoch a draw of them by temperature over the examples kept (a pair's
    rows taken on from where the epoch before stopped: epoch_indices). Also the examples kept, and the report."""
    if sum(sizes) != len(rows):
        raise TrainingError(f"pair sizes {list(sizes)} add up to {sum(sizes)}, not the {len(rows)} training rows")
    stores, reports, start = [], [], 0
    for i, size in enumerate(sizes):
        store, report = make_translation_examples(rows[start : start + size], tokenizer, max_length, overlong)
        if size and not len(store):
            raise TrainingError(
                f"no training examples left of pair {i + 1}: its {size} rows are longer than max_length={max_length} "
                "tokens; raise max_length or use overlong='truncate'"
            )
        stores.append(store)
        reports.append(report)
        start += size
    joined = ExampleStore.join(stores, tokenizer.id_dtype)
    kept = [len(store) for store in stores]
    counts = rows_per_pair(kept, temperature)
    total = total_report(reports)
    return lambda epoch: joined.take(np.asarray(epoch_indices(kept, counts, seed, epoch))), len(joined), total


def _valid_examples(
    rows: Sequence[tuple[str, str]], groups: Sequence[str], tokenizer: Tokenizer, max_length: int, overlong: Overlong
) -> tuple[list[Example], list[str], LengthReport]:
    """The validation examples, and the pair of each one when `groups` names each row's: encoded pair by pair and
    interleaved (one of each pair in turn, a pair that runs out leaving the others), so that the first N examples
    (those decoded for BLEU, calibrated on, probed) hold every pair."""
    if not groups:
        store, report = make_translation_examples(rows, tokenizer, max_length, overlong)
        return list(store), [], report
    if len(groups) != len(rows):
        raise TrainingError(f"{len(groups)} pair names for {len(rows)} validation rows")
    by_pair: dict[str, list[tuple[str, str]]] = {}
    for name, row in zip(groups, rows):
        by_pair.setdefault(name, []).append(row)
    encoded, reports = {}, []
    for name, pair_rows in by_pair.items():
        store, report = make_translation_examples(pair_rows, tokenizer, max_length, overlong)
        encoded[name] = list(store)
        reports.append(report)
    examples: list[Example] = []
    names: list[str] = []
    for turn in zip_longest(*encoded.values()):
        for name, example in zip(encoded, turn):
            if example is not None:
                examples.append(example)
                names.append(name)
    total = total_report(reports)
    return examples, names, total


def _require_examples(what: str, n: int, n_rows: int, dropped: int, max_length: int) -> None:
    if n == 0:
        raise TrainingError(
            f"no {what} examples left: {dropped} of {n_rows} rows are longer than max_length={max_length} "
            f"tokens; raise max_length or use overlong='truncate'"
        )


def _check_rows(objective: str, rows: Any, name: str) -> None:
    if not isinstance(rows, Sequence) or isinstance(rows, str) or len(rows) == 0:
        raise TrainingError(f"{name} is empty")
    for i, row in enumerate(rows):
        ok = (
            isinstance(row, (tuple, list)) and len(row) == 2 and all(isinstance(s, str) and s.strip() for s in row)
            if objective == "translation"
            else isinstance(row, str) and row.strip()
        )
        if not ok:
            shape = (
                "a (source, target) pair of non-empty strings" if objective == "translation" else "a non-empty string"
            )
            raise TrainingError(f"{name}[{i}] must be {shape}, got {row!r:.80}")
