"""Spec of beam_search: greedy at beam size 1, the KV cache changes nothing, batching changes nothing, the
GNMT length penalty ranks as the formula says, and the n-best list is sorted."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Sequence

import pytest
import torch
from torch import Tensor, nn

from model.data.batching import Example, TokenBatcher, pad_sequences
from model.data.demo import reverse_task
from model.data.tokenizer import Tokenizer
from model.decode import beam
from model.decode.beam import beam_search, length_penalty, max_target_len
from model.decode.greedy import default_max_len, greedy_decode
from model.nn.config import ModelConfig
from model.nn.transformer import Transformer
from model.train.config import TrainConfig
from model.train.step import build_optimizer, train_step
from tests.support.trained_cache import trained_once

PAD, BOS, EOS = 0, 1, 2


# -- helpers shared with test_inference and test_export -----------------------------------------------------


@contextlib.contextmanager
def single_thread() -> Iterator[None]:
    """torch on one thread: tiny models gain little from a second one, and on a shared CPU every op of a
    2-thread run can wait a scheduler tick for the other thread (measured: training 10x slower under load)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def train_tiny(
    examples: Sequence[Example] | Callable[[int], Sequence[Example]],
    vocab_size: int,
    steps: int,
    peak_lr: float = 3e-3,
    seed: int = 0,
) -> Transformer:
    """A tiny-preset model trained with model.train.step.train_step; warm-up then linear decay to 0, so the last
    steps are calm and the result does not depend on where a noisy step happened to land.

    On one thread (see single_thread)."""
    with single_thread():
        return _train(examples, vocab_size, steps, peak_lr, seed)


def _train(
    examples: Sequence[Example] | Callable[[int], Sequence[Example]],
    vocab_size: int,
    steps: int,
    peak_lr: float,
    seed: int,
) -> Transformer:
    torch.manual_seed(seed)
    model = Transformer(ModelConfig.from_preset("tiny", vocab_size, max_positions=64))
    config = TrainConfig(
        max_steps=steps,
        peak_lr=peak_lr,
        warmup_steps=steps // 10,
        label_smoothing=0.0,
        max_tokens_per_batch=1024,
        seed=seed,
    )
    optimizer = build_optimizer(model, config)
    batcher = TokenBatcher(examples, max_tokens=config.max_tokens_per_batch, seed=seed)
    batches = iter(batcher)
    warmup = config.warmup_steps
    for step in range(steps):
        batch = next(batches, None)
        if batch is None:  # next epoch
            batches = iter(batcher)
            batch = next(batches)
        lr = peak_lr * min((step + 1) / warmup, (steps - step) / (steps - warmup))
        train_step(model, optimizer, [batch], lr, config)
    return model.eval()


def reverse_model() -> tuple[Transformer, Tokenizer]:
    """Tiny model trained on reversing 3-8 symbols (each symbol one token); ~98% exact on held-out data. Five files
    use it: trained once a run (tests/support/trained_cache.py)."""
    return trained_once("reverse", _train_reverse)


def _train_reverse() -> tuple[Transformer, Tokenizer]:
    pairs = reverse_task(3000, max_len=8, seed=0)
    tokenizer = Tokenizer.train([t for pair in pairs for t in pair], 300)
    examples = [Example(tokenizer.encode(s), tokenizer.encode(t)) for s, t in pairs]
    return train_tiny(examples, tokenizer.vocab_size, steps=400), tokenizer


def reverse_sources(tokenizer: Tokenizer, n: int, seed: int = 99) -> list[list[int]]:
    return [tokenizer.encode(s) + [EOS] for s, _ in reverse_task(n, max_len=8, seed=seed)]


# -- fixtures -------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module", autouse=True)
def one_thread() -> Iterator[None]:
    with single_thread():
        yield


@pytest.fixture(scope="module")
def trained() -> tuple[Transformer, Tokenizer]:
    return reverse_model()


@pytest.fixture(scope="module")
def random_model() -> Transformer:
    """Untrained: rarely ends a hypothesis, so the searches run to their maximum lengths."""
    torch.manual_seed(0)
    return Transformer(ModelConfig.from_preset("tiny", 40, max_positions=64)).eval()


def random_sources(n: int, seed: int = 0) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, 9, (n,), generator=g).tolist()
    return [torch.randint(5, 40, (k,), generator=g).tolist() + [EOS] for k in lengths]


def tokens_and_scores(nbest: list[list]) -> tuple[list, list]:
    return [[h.tokens for h in hyps] for hyps in nbest], [[h.score for h in hyps] for hyps in nbest]


# -- beam size 1 is greedy ------------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["random", "trained"])
def test_beam_size_1_equals_greedy_decode(which, random_model, trained):
    model = random_model if which == "random" else trained[0]
    sources = random_sources(8) if which == "random" else reverse_sources(trained[1], 32)
    for src in sources:  # one by one: greedy's max length comes from the padded width
        src_ids = torch.tensor([src])
        assert beam_search(model, src_ids, beam_size=1)[0][0].tokens == greedy_decode(model, src_ids)[0]


def test_beam_size_1_equals_greedy_decode_on_a_padded_batch(trained):
    model, tokenizer = trained
    src = pad_sequences(reverse_sources(tokenizer, 32))
    greedy = greedy_decode(model, src)
    assert [hyps[0].tokens for hyps in beam_search(model, src, beam_size=1)] == greedy
    assert all(len(g) < 16 for g in greedy)  # every sentence ended with </s>: no length limit was involved


# -- the KV cache ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("preallocated", [False, True], ids=["cpu-cache", "gpu-preallocated-cache"])
@pytest.mark.parametrize("which", ["random", "trained"])
def test_cached_decoding_equals_full_recomputation(which, preallocated, random_model, trained, monkeypatch):
    """Both caches: grown by concatenation (the CPU's) and preallocated (the GPU's, injected here)."""
    assert beam.cache_capacity(torch.device("cuda", 0), 9) == 9 and beam.cache_capacity(torch.device("cpu"), 9) is None
    if preallocated:
        monkeypatch.setattr(beam, "cache_capacity", lambda device, positions: positions)
    model = random_model if which == "random" else trained[0]
    sources = random_sources(8, seed=1) if which == "random" else reverse_sources(trained[1], 16, seed=5)
    src = pad_sequences(sources)
    cached = beam_search(model, src, beam_size=4, n_best=4, use_cache=True)
    full = beam_search(model, src, beam_size=4, n_best=4, use_cache=False)
    (cached_tokens, cached_scores), (full_tokens, full_scores) = tokens_and_scores(cached), tokens_and_scores(full)
    assert cached_tokens == full_tokens
    for a, b in zip(cached_scores, full_scores):
        assert a == pytest.approx(b, abs=1e-5)


# -- batching -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["random", "trained"])
def test_a_padded_batch_equals_its_sentences_one_by_one(which, random_model, trained):
    model = random_model if which == "random" else trained[0]
    sources = random_sources(10, seed=2) if which == "random" else reverse_sources(trained[1], 16, seed=6)
    batched = beam_search(model, pad_sequences(sources), beam_size=3, n_best=3)
    single = [beam_search(model, torch.tensor([s]), beam_size=3, n_best=3)[0] for s in sources]
    (bt, bs), (st, ss) = tokens_and_scores(batched), tokens_and_scores(single)
    assert bt == st
    for a, b in zip(bs, ss):
        assert a == pytest.approx(b, abs=1e-5)


def test_each_sentence_gets_its_own_maximum_length(random_model):
    sources = [[5] * 2 + [EOS], [6] * 7 + [EOS]]
    out = beam_search(random_model, pad_sequences(sources), beam_size=2, max_len_a=1.0, max_len_b=1, alpha=0.0)
    for src, hyps in zip(sources, out):
        limit = max_target_len(len(src), 1.0, 1, 64)
        assert all(len(h.tokens) + 1 <= limit if h.finished else len(h.tokens) == limit for h in hyps)


def test_default_maximum_length_is_greedys_and_capped_by_max_positions(random_model):
    src = torch.tensor([[7] * 5 + [EOS]])
    assert max_target_len(6, 2.0, 10, 64) == default_max_len(random_model, 6) == 22
    assert max_target_len(40, 2.0, 10, 64) == 64
    assert max_target_len(1, 0.0, 0, 64) == 1
    hyp = beam_search(random_model, src, beam_size=1, min_len=100)[0][0]  # </s> forbidden: runs to the limit
    assert len(hyp.tokens) == 22 and not hyp.finished


# -- scores, n-best, length penalty ---------------------------------------------------------------------------


def test_n_best_is_sorted_by_score_and_scores_are_log_prob_over_length_penalty(trained):
    model, tokenizer = trained
    out = beam_search(model, pad_sequences(reverse_sources(tokenizer, 8)), beam_size=5, n_best=5, alpha=0.6)
    for hyps in out:
        assert len(hyps) == 5
        scores = [h.score for h in hyps]
        assert scores == sorted(scores, reverse=True)
        assert len({tuple(h.tokens) for h in hyps}) == 5
        for h in hyps:
            length = len(h.tokens) + h.finished  # </s> counts
            assert h.score == pytest.approx(h.log_prob / ((5 + length) / 6) ** 0.6)
            assert h.log_prob <= 0


def test_score_is_the_models_log_probability_of_the_hypothesis(trained):
    model, tokenizer = trained
    src = torch.tensor(reverse_sources(tokenizer, 1, seed=3))
    hyp = beam_search(model, src, beam_size=4)[0][0]
    assert hyp.finished
    tgt_in = torch.tensor([[BOS, *hyp.tokens]])
    with torch.no_grad():
        logp = torch.log_softmax(model(src, tgt_in), dim=-1)[0]  # (T, V)
    expected = sum(logp[i, t].item() for i, t in enumerate(hyp.tokens + [EOS]))
    assert hyp.log_prob == pytest.approx(expected, abs=1e-4)


def test_length_penalty_formula():
    assert length_penalty(1, 0.6) == 1.0
    assert length_penalty(7, 0.6) == pytest.approx(2.0**0.6)
    assert length_penalty(10, 0.0) == 1.0


class ScriptedModel(nn.Module):
    """Next-token probabilities from a table keyed by the prefix (without <s>); decoding is recomputed from
    the full prefix each step (use_cache=False), so the table is all there is."""

    def __init__(self, table: dict[tuple[int, ...], dict[int, float]], vocab_size: int = 10) -> None:
        super().__init__()
        self.config = ModelConfig(
            vocab_size=vocab_size,
            d_model=4,
            n_heads=1,
            n_encoder_layers=1,
            n_decoder_layers=1,
            d_ff=4,
            max_positions=16,
        )
        self.table = table
        self.anchor = nn.Parameter(torch.zeros(1))
        self._prefixes: list[tuple[int, ...]] = []

    def encode(self, src_ids: Tensor, src_key_padding_mask: Tensor) -> Tensor:
        return torch.zeros(src_ids.size(0), src_ids.size(1), 4)

    def new_cache(self) -> None:
        return None

    def decode(self, tgt_ids: Tensor, memory: Tensor, src_key_padding_mask: Tensor, cache: None = None) -> Tensor:
        self._prefixes = [tuple(row[1:]) for row in tgt_ids.tolist()]
        return torch.zeros(tgt_ids.size(0), tgt_ids.size(1), 4)

    def project(self, hidden: Tensor) -> Tensor:
        logits = torch.full((hidden.size(0), self.config.vocab_size), -1e9)
        for row, prefix in enumerate(self._prefixes):
            for token, p in self.table.get(prefix, {EOS: 1.0}).items():
                logits[row, token] = math.log(p)
        return logits


def test_length_penalty_changes_the_ranking():
    # "</s>" at once: P = 0.3, one token. "5 </s>": P = 0.7 * 0.4 = 0.28, two tokens.
    table = {(): {EOS: 0.3, 5: 0.7}, (5,): {EOS: 0.4, 6: 0.6}, (5, 6): {EOS: 0.1, 7: 0.9}}
    model = ScriptedModel(table)
    src = torch.tensor([[5, EOS]])

    def ranking(alpha: float) -> list[list[int]]:
        return [h.tokens for h in beam_search(model, src, beam_size=3, n_best=3, alpha=alpha, use_cache=False)[0]]

    assert ranking(0.0)[:2] == [[], [5]]  # raw log-probability prefers the short one: log 0.3 > log 0.28
    # alpha = 1: log 0.3 / 1 = -1.20 < log 0.28 / (7/6) = -1.09, so the longer one wins.
    assert ranking(1.0)[:2] == [[5], []]
    hyps = beam_search(model, src, beam_size=3, n_best=3, alpha=1.0, use_cache=False)[0]
    assert hyps[0].log_prob == pytest.approx(math.log(0.28))
    assert hyps[0].score == pytest.approx(math.log(0.28) / (7 / 6))


def test_beam_search_finds_what_greedy_misses():
    # Greedy takes 5 (0.6) and then can only end with 0.5; the beam finds 6 then </s>: 0.4 * 1.0 > 0.6 * 0.5.
    table = {(): {5: 0.6, 6: 0.4}, (5,): {EOS: 0.5, 7: 0.5}, (6,): {EOS: 1.0}, (5, 7): {EOS: 1.0}}
    model = ScriptedModel(table)
    src = torch.tensor([[5, EOS]])
    assert beam_search(model, src, beam_size=1, alpha=0.0, use_cache=False)[0][0].tokens in ([5], [5, 7])
    best = beam_search(model, src, beam_size=2, alpha=0.0, use_cache=False)[0][0]
    assert best.tokens == [6] and best.log_prob == pytest.approx(math.log(0.4))


def test_search_stops_once_every_sentence_has_beam_size_finished_hypotheses(random_model):
    calls = []
    original = random_model.project

    def counting(hidden: Tensor) -> Tensor:
        calls.append(1)
        logits = original(hidden)
        logits[:, EOS] = 100.0  # every hypothesis ends at once
        return logits

    random_model.project = counting
    try:
        out = beam_search(random_model, pad_sequences(random_sources(3)), beam_size=4, n_best=4)
    finally:
        del random_model.project
    assert len(calls) <= 2
    assert all(h.finished for hyps in out for h in hyps)


# -- arguments and modes --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"beam_size": 0}, "beam_size=0"),
        ({"beam_size": 2, "n_best": 3}, "n_best=3"),
        ({"alpha": -0.1}, "alpha=-0.1"),
    ],
)
def test_invalid_arguments_are_refused_with_the_value(random_model, kwargs, message):
    with pytest.raises(ValueError, match=message):
        beam_search(random_model, torch.tensor([[5, EOS]]), **kwargs)


def test_a_source_longer_than_max_positions_is_refused(random_model):
    with pytest.raises(ValueError, match="max_positions=64"):
        beam_search(random_model, torch.full((1, 65), 5))


def test_beam_search_restores_training_mode(random_model):
    random_model.train()
    try:
        beam_search(random_model, torch.tensor([[5, EOS]]), beam_size=2, max_len_a=0, max_len_b=2)
        assert random_model.training
    finally:
        random_model.eval()
