"""Spec of greedy_decode, and the toy task that proves the model learns."""

import pytest
import torch

from model.decode.greedy import greedy_decode
from model.nn.config import ModelConfig
from model.nn.transformer import Transformer

PAD, BOS, EOS, V = 0, 1, 2, 16


def copy_batch(g: torch.Generator, batch_size: int = 64) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Copy task: source "x_1 .. x_n EOS", target input "BOS x_1 .. x_n", target output "x_1 .. x_n EOS";
    n varies from 3 to 8, padded on the right."""
    lengths = torch.randint(3, 9, (batch_size,), generator=g)
    src = torch.full((batch_size, 9), PAD)
    tgt_in, tgt_out = src.clone(), src.clone()
    for row, n in enumerate(lengths.tolist()):
        tokens = torch.randint(5, V, (n,), generator=g)
        src[row, : n + 1] = torch.cat([tokens, torch.tensor([EOS])])
        tgt_in[row, : n + 1] = torch.cat([torch.tensor([BOS]), tokens])
        tgt_out[row, : n + 1] = src[row, : n + 1]
    return src, tgt_in, tgt_out


@pytest.fixture(scope="module")
def copy_model() -> Transformer:
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = Transformer(ModelConfig.from_preset("tiny", V, max_positions=32))
    steps, warmup = 250, 20
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.98))
    # Warm up, then decay linearly to 0, so the last steps are calm and the test is not flaky.
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warmup, (steps - s) / (steps - warmup))
    )
    for _ in range(steps):
        src, tgt_in, tgt_out = copy_batch(g)
        logits = model(src, tgt_in)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=PAD)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
    return model


def test_tiny_model_learns_to_copy(copy_model):
    src, _, _ = copy_batch(torch.Generator().manual_seed(123), batch_size=64)
    expected = [row[: row.index(EOS)] for row in src.tolist()]
    outputs = greedy_decode(copy_model, src)
    accuracy = sum(out == exp for out, exp in zip(outputs, expected)) / len(expected)
    assert accuracy >= 0.9, list(zip(outputs, expected))[:5]


def test_cached_and_uncached_greedy_agree(copy_model):
    src, _, _ = copy_batch(torch.Generator().manual_seed(7), batch_size=16)
    assert greedy_decode(copy_model, src) == greedy_decode(copy_model, src, use_cache=False)


def scripted(model: Transformer, eos_steps: list[int | None]) -> list[int]:
    """Make model.project emit token 7 + step % 5, except EOS for row r at step eos_steps[r]; count the calls."""
    calls = []

    def project(hidden: torch.Tensor) -> torch.Tensor:
        step = len(calls)
        calls.append(step)
        logits = torch.zeros(hidden.size(0), V)
        logits[:, 7 + step % 5] = 1.0
        for row, eos_step in enumerate(eos_steps):
            if eos_step == step:
                logits[row, EOS] = 2.0
        return logits

    model.project = project
    return calls


@pytest.fixture
def fresh_model() -> Transformer:
    torch.manual_seed(0)
    return Transformer(ModelConfig.from_preset("tiny", V, max_positions=20))


def test_each_sentence_stops_at_its_own_eos_and_eos_is_not_returned(fresh_model):
    calls = scripted(fresh_model, [2, 4])
    out = greedy_decode(fresh_model, torch.tensor([[5, 6, EOS], [5, EOS, PAD]]))
    assert out == [[7, 8], [7, 8, 9, 10]]
    assert len(calls) == 5  # stops as soon as every sentence has finished


def test_default_max_len_is_twice_the_source_plus_ten_capped_by_max_positions(fresh_model):
    scripted(fresh_model, [None])
    assert len(greedy_decode(fresh_model, torch.tensor([[5, 6, EOS]]))[0]) == 3 * 2 + 10
    assert len(greedy_decode(fresh_model, torch.tensor([[5] * 7]))[0]) == 20  # 7 * 2 + 10 > max_positions
    assert len(greedy_decode(fresh_model, torch.tensor([[5, 6, EOS]]), max_len=4)[0]) == 4


def test_a_sentence_decodes_the_same_alone_and_beside_a_longer_one(fresh_model):
    """The length limit comes from each sentence's own length, not the padded batch width: an untrained model
    that never says </s> stops the short sentence at 3 * 2 + 10 tokens in both cases."""
    scripted(fresh_model, [None])
    alone = greedy_decode(fresh_model, torch.tensor([[5, 6, EOS]]))
    scripted(fresh_model, [None, None])
    batched = greedy_decode(fresh_model, torch.tensor([[5, 6, EOS, PAD, PAD], [5, 6, 7, 8, EOS]]))
    assert batched[0] == alone[0] and len(alone[0]) == 16
    assert len(batched[1]) == 20  # its own limit, 5 * 2 + 10, capped by max_positions


def test_greedy_decode_restores_training_mode(fresh_model):
    fresh_model.train()
    greedy_decode(fresh_model, torch.tensor([[5, 6, EOS]]), max_len=2)
    assert fresh_model.training
