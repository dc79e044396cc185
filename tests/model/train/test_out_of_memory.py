"""A step that runs out of device memory is retried with its micro-batches split in two, and the update is the
one of the unsplit batch; past MAX_OOM_SPLITS halvings the error names the batch and a smaller batch size.

No GPU here: the model's encoder raises torch.OutOfMemoryError (what CUDA's allocator raises) whenever it is
given more sentences than a budget, as a device with less memory would."""

from __future__ import annotations

import copy

import pytest
import torch

from model.data.batching import Example, collate
from model.nn.config import ModelConfig
from model.nn.out_of_memory import is_out_of_memory
from model.nn.transformer import Transformer
from model.train.config import TrainConfig
from model.train.step import MAX_OOM_SPLITS, BatchTooLarge, build_optimizer, train_step


def examples(n: int) -> list[Example]:
    return [
        Example([5 + i % 30, 6 + i % 20, 7 + i][: 2 + i % 2], [8 + i, 9, 10 + i % 25][: 1 + i % 3]) for i in range(n)
    ]


def model_and_optimizer(config: TrainConfig) -> tuple[Transformer, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = Transformer(ModelConfig.from_preset("tiny", 48, dropout=0.0))
    return model, build_optimizer(model, config)


def limit_sentences(model: Transformer, most: int) -> list[int]:
    """Make model.encode raise CUDA's out-of-memory error on batches of more than `most` sentences; returns the
    batch sizes it was called with."""
    encode, seen = model.encode, []

    def encode_within_memory(src, *args, **kwargs):
        seen.append(src.shape[0])
        if src.shape[0] > most:
            raise torch.OutOfMemoryError(f"CUDA out of memory. Tried to allocate {src.shape[0]} rows")
        return encode(src, *args, **kwargs)

    model.encode = encode_within_memory  # type: ignore[method-assign]
    return seen


def test_a_step_out_of_memory_is_retried_split_and_equals_the_unsplit_update(caplog):
    config = TrainConfig(max_tokens_per_batch=512)
    batches = [collate(examples(8)), collate(examples(6))]
    reference, ref_opt = model_and_optimizer(config)
    expected = train_step(reference, ref_opt, batches, 1e-3, config)

    model, optimizer = model_and_optimizer(config)
    seen = limit_sentences(model, most=2)  # 8 and 6 sentences fit only once split in four (2+2+2+2, 2+1+2+1)
    with caplog.at_level("WARNING", logger="model.train.step"):
        result = train_step(model, optimizer, batches, 1e-3, config)

    assert seen[:1] == [8] and max(seen[-6:]) <= 2, seen  # tried whole, then halves, then quarters
    assert sum(1 for r in caplog.records if "out of memory" in r.getMessage()) == 2
    assert result.n_tokens == expected.n_tokens
    assert result.loss == pytest.approx(expected.loss, rel=1e-5)
    assert result.grad_norm == pytest.approx(expected.grad_norm, rel=1e-4)
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-7, msg=name)  # the same gradient
        # and so the same Adam update, except where the true gradient is ~0 (k_proj.bias, whose gradient
        # softmax cancels; dead ReLU units): Adam's first step is about lr * sign(g), whatever rounding left in g
        clear = q.grad.abs() > 1e-6
        torch.testing.assert_close(p[clear], q[clear], rtol=1e-5, atol=1e-6, msg=name)


def test_past_the_last_split_the_error_names_the_batch_and_a_smaller_size():
    config = TrainConfig(max_tokens_per_batch=4096)
    model, optimizer = model_and_optimizer(config)
    before = copy.deepcopy(model.state_dict())
    seen = limit_sentences(model, most=0)  # nothing fits
    with pytest.raises(BatchTooLarge) as failure:
        train_step(model, optimizer, [collate(examples(16))], 1e-3, config)
    message = str(failure.value)
    assert "16 sentences" in message and "max_tokens_per_batch=4096" in message and "try 512" in message
    assert f"split in {2**MAX_OOM_SPLITS}" in message
    assert seen == [16, 8, 4, 2]  # one try per halving, then given up
    assert all(p.grad is None for p in model.parameters())  # no half-accumulated gradient is left behind
    for name, value in model.state_dict().items():
        torch.testing.assert_close(value, before[name], msg=name)  # and no update was taken


def test_other_errors_are_not_retried():
    config = TrainConfig()
    model, optimizer = model_and_optimizer(config)
    calls = []

    def broken(src, *args, **kwargs):
        calls.append(1)
        raise RuntimeError("shape mismatch")

    model.encode = broken  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="shape mismatch"):
        train_step(model, optimizer, [collate(examples(4))], 1e-3, config)
    assert len(calls) == 1


def test_out_of_memory_errors_are_recognised_whatever_the_allocator():
    assert is_out_of_memory(torch.OutOfMemoryError("CUDA out of memory"))
    assert is_out_of_memory(torch.cuda.OutOfMemoryError("CUDA out of memory"))
    assert is_out_of_memory(MemoryError())
    assert is_out_of_memory(RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 8 GB"))
    assert not is_out_of_memory(RuntimeError("mat1 and mat2 shapes cannot be multiplied"))


def test_halves_keep_every_sentence_and_token_count():
    batch = collate(examples(7), indices=range(7))
    first, second = batch.halves()
    assert (first.src.shape[0], second.src.shape[0]) == (4, 3)
    assert first.n_tgt_tokens + second.n_tgt_tokens == batch.n_tgt_tokens
    assert first.n_src_tokens + second.n_src_tokens == batch.n_src_tokens
    assert first.indices + second.indices == tuple(range(7))
    torch.testing.assert_close(torch.cat([first.tgt_out, second.tgt_out]), batch.tgt_out)
    assert collate(examples(1)).halves()[0].src.shape[0] == 1
