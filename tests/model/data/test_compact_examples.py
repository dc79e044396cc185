"""Spec of a prepared corpus held as arrays: token ids as uint16 arrays give exactly the batches, the noise and the
training losses that the same ids as lists of ints give (what prepare() made before)."""

from dataclasses import replace

import numpy as np
import pytest
import torch

from model.data.batching import Example, TokenBatcher, ids_list
from model.data.demo import grammar_sentences, reverse_task
from model.data.example_store import ExampleStore
from model.data.objectives import noise_examples
from model.data.tokenizer import Tokenizer
from model.train.config import TrainConfig
from model.train.events import Callbacks
from model.train.loop import train
from model.train.prepare import PreparedData, prepare
from model.train.settings import DataSettings

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/model/conftest.py


@pytest.fixture(scope="module")
def translation() -> PreparedData:
    rows = reverse_task(300, vocab=12, min_len=2, max_len=8, seed=0)
    return prepare("translation", rows, preset="tiny", vocab_size=300, settings=DataSettings(max_length=16))


@pytest.fixture(scope="module")
def denoising() -> PreparedData:
    settings = DataSettings(max_length=16, noise="span", mask_ratio=0.3)
    return prepare("denoising", grammar_sentences(200, seed=0), preset="tiny", vocab_size=450, settings=settings)


def _as_lists(examples: list[Example]) -> list[Example]:
    return [Example(ids_list(e.src_ids), ids_list(e.tgt_ids)) for e in examples]


def _with_lists(data: PreparedData) -> PreparedData:
    """The same data with every example's ids as lists of Python ints."""
    train_examples = data.train_examples
    lists = (lambda epoch: _as_lists(train_examples(epoch))) if callable(train_examples) else _as_lists(train_examples)
    return replace(data, train_examples=lists, valid_examples=_as_lists(data.valid_examples))


def test_prepared_examples_hold_uint16_arrays_of_the_tokenizers_ids(translation):
    rows = reverse_task(300, vocab=12, min_len=2, max_len=8, seed=0)
    examples = translation.train_examples
    assert isinstance(examples, ExampleStore) and examples.src.ids.dtype == examples.tgt.ids.dtype == np.uint16
    assert all(
        isinstance(ids, np.ndarray) and ids.dtype == np.uint16 for e in examples for ids in (e.src_ids, e.tgt_ids)
    )
    encoded = {(tuple(translation.tokenizer.encode(s)), tuple(translation.tokenizer.encode(t))) for s, t in rows}
    assert all((tuple(e.src_ids.tolist()), tuple(e.tgt_ids.tolist())) in encoded for e in examples)


def test_ids_take_int32_when_the_vocabulary_passes_uint16(translation):
    tok = translation.tokenizer
    assert tok.id_dtype == np.uint16
    big = Tokenizer.__new__(Tokenizer)
    big._tk = type("Big", (), {"get_vocab_size": lambda self, with_added_tokens: 2**16 + 1})()  # only its size
    assert big.id_dtype == np.int32


def test_encode_arrays_gives_encode_batchs_ids_across_chunks(translation):
    tok, texts = translation.tokenizer, [s for s, _ in reverse_task(20, vocab=12, seed=1)]
    arrays = tok.encode_arrays(texts, chunk=3)
    assert [a.tolist() for a in arrays] == tok.encode_batch(texts)


def test_a_tokenizer_trained_from_an_iterator_is_the_one_trained_from_a_list():
    texts = [t for pair in reverse_task(200, vocab=30, seed=2) for t in pair]
    for kind in ("byte_bpe", "bpe"):  # unigram's training is not deterministic even for the same list
        from_list = Tokenizer.train(texts, 400, kind=kind)
        assert Tokenizer.train(iter(texts), 400, kind=kind).fingerprint == from_list.fingerprint


@pytest.mark.parametrize("mode", ["span", "token"])
def test_noise_on_arrays_is_the_noise_on_lists(denoising, mode):
    sentences = [e.tgt_ids for e in denoising.train_examples(0)]
    for epoch in range(3):
        on_arrays = noise_examples(sentences, seed=5, epoch=epoch, mode=mode, mask_ratio=0.3)
        on_lists = noise_examples([s.tolist() for s in sentences], seed=5, epoch=epoch, mode=mode, mask_ratio=0.3)
        assert all(isinstance(e.src_ids, np.ndarray) and e.src_ids.dtype == np.uint16 for e in on_arrays)
        assert [(e.src_ids.tolist(), e.tgt_ids.tolist()) for e in on_arrays] == [
            (e.src_ids, e.tgt_ids) for e in on_lists
        ]


@pytest.mark.parametrize("fixture", ["translation", "denoising"])
def test_array_examples_give_exactly_the_batches_of_lists(request, fixture):
    data: PreparedData = request.getfixturevalue(fixture)
    arrays, lists = (TokenBatcher(d.train_examples, 128, seed=3, max_len=16) for d in (data, _with_lists(data)))
    for epoch in range(2):
        arrays.epoch, arrays.position, lists.epoch, lists.position = epoch, 0, epoch, 0  # zip leaves one unfinished
        pairs = list(zip(arrays, lists))
        assert len(pairs) == len(arrays.batch_indices()) > 1
        for a, b in pairs:
            for name in ("src", "tgt_in", "tgt_out", "target_positions"):
                x, y = getattr(a, name), getattr(b, name)
                assert x.dtype == y.dtype == torch.int64 and torch.equal(x, y), name
            assert (a.n_src_tokens, a.n_tgt_tokens, a.indices) == (b.n_src_tokens, b.n_tgt_tokens, b.indices)


@pytest.mark.parametrize("fixture", ["translation", "denoising"])
def test_training_on_arrays_gives_exactly_the_losses_of_lists(request, fixture):
    data: PreparedData = request.getfixturevalue(fixture)
    config = TrainConfig(
        max_steps=6, max_tokens_per_batch=128, warmup_steps=4, peak_lr=1e-3, eval_every=3, eval_max_sentences=8,
        checkpoint_every=1000, seed=0, eval_budget=None,
    )  # fmt: skip
    evals: dict[str, list[dict[str, float]]] = {"arrays": [], "lists": []}
    on_arrays = train(data, config, callbacks=Callbacks(on_eval=lambda s, m: evals["arrays"].append(m)))
    on_lists = train(_with_lists(data), config, callbacks=Callbacks(on_eval=lambda s, m: evals["lists"].append(m)))
    assert len(on_arrays.losses) == 6 and on_arrays.losses == on_lists.losses
    assert len(evals["arrays"]) == 2
    for a, b in zip(evals["arrays"], evals["lists"]):
        assert {k: v for k, v in a.items() if k != "eval_seconds"} == {
            k: v for k, v in b.items() if k != "eval_seconds"
        }
