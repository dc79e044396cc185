"""The projection fused with the label-smoothed loss equals the logits then the loss: values and gradients, in
float32 and under bf16 autocast, chunked or not, and in the training step."""

import pytest
import torch

from model.data.batching import Example, collate
from model.nn.config import ModelConfig
from model.nn.transformer import Transformer
from model.train import linear_loss, step
from model.train.linear_loss import linear_label_smoothed_loss, rows_per_chunk, use_fused_linear_loss
from model.train.loss import label_smoothed_loss
from model.train.step import accumulate_gradients, autocast_for


def _inputs(n: int = 37, d: int = 16, vocab: int = 50, dtype: torch.dtype = torch.float64):
    torch.manual_seed(0)
    hidden = torch.randn(n, d, dtype=dtype, requires_grad=True)
    weight = (0.3 * torch.randn(vocab, d, dtype=dtype)).requires_grad_()
    return hidden, weight, torch.randint(0, vocab, (n,))


def _unfused(hidden, weight, target, smoothing, row_weight=None):
    return label_smoothed_loss(hidden @ weight.T, target, smoothing, weight=row_weight)


@pytest.mark.parametrize("chunk_rows", [None, 1, 5, 37, 100])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_values_and_gradients_equal_the_unfused_loss(chunk_rows, smoothing):
    hidden, weight, target = _inputs()
    row_weight = (torch.arange(37) % 4 != 0).double()  # every fourth row ignored, as padding would be
    expected = _unfused(hidden, weight, target, smoothing, row_weight)
    (3.0 * expected[0]).backward()
    want = hidden.grad.clone(), weight.grad.clone()
    hidden.grad = weight.grad = None

    loss, nll = linear_label_smoothed_loss(
        hidden, weight, target, smoothing, row_weight=row_weight, chunk_rows=chunk_rows
    )
    (3.0 * loss).backward()
    assert loss.item() == pytest.approx(expected[0].item(), rel=1e-12)
    assert nll.item() == pytest.approx(expected[1].item(), rel=1e-12)
    torch.testing.assert_close(hidden.grad, want[0], rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(weight.grad, want[1], rtol=1e-10, atol=1e-12)


def test_bf16_autocast_is_as_accurate_as_the_unfused_step():
    """Against float64 truth, the fused gradients under bf16 autocast (in chunks, each product rounded once) err
    no more than the unfused step's (one product, rounded once)."""
    hidden, weight, target = _inputs(n=64, d=32, vocab=300, dtype=torch.float32)

    def grads(loss_of):
        hidden.grad = weight.grad = None
        loss = loss_of()
        loss.backward()
        return loss.item(), hidden.grad.clone(), weight.grad.clone()

    def unfused():
        with autocast_for(torch.device("cpu"), "bf16"):
            logits = hidden @ weight.T  # bf16, as the unfused step's projection
        assert logits.dtype == torch.bfloat16
        return label_smoothed_loss(logits, target, 0.1)[0]

    def fused():
        with autocast_for(torch.device("cpu"), "bf16"):
            loss = linear_label_smoothed_loss(hidden, weight, target, 0.1, chunk_rows=10)[0]
        assert loss.dtype == torch.float32
        return loss

    truth = grads(lambda: label_smoothed_loss(hidden.double() @ weight.double().T, target, 0.1)[0])
    ours, theirs = grads(fused), grads(unfused)
    assert ours[1].dtype == ours[2].dtype == torch.float32  # the leaves' own dtypes
    assert abs(ours[0] - truth[0]) <= 1.25 * abs(theirs[0] - truth[0]) + 1e-3 * abs(truth[0])
    for i in (1, 2):  # d hidden, d weight
        error, baseline = (ours[i] - truth[i]).norm(), (theirs[i] - truth[i]).norm()
        assert 0 < error <= 1.25 * baseline, (i, error, baseline)  # 0 would mean bf16 never ran


def test_the_nll_is_for_reporting_and_carries_no_gradient():
    hidden, weight, target = _inputs()
    loss, nll = linear_label_smoothed_loss(hidden, weight, target, 0.1)
    assert loss.requires_grad and not nll.requires_grad


def test_chunks_bound_the_float32_logits():
    assert rows_per_chunk(32_000) == 524  # 64 MiB of float32 logits
    assert rows_per_chunk(10**9) == 1


@pytest.mark.parametrize(
    ("shapes", "message"),
    [
        (((4, 8), (10, 7), (4,)), r"hidden \(4, 8\) and weight \(10, 7\)"),
        (((4, 8, 1), (10, 8), (4,)), r"hidden \(4, 8, 1\)"),
        (((4, 8), (10, 8), (5,)), r"target \(5,\) must be \(4,\)"),
    ],
)
def test_bad_shapes_are_refused_naming_them(shapes, message):
    hidden, weight, target = (torch.zeros(s) for s in shapes)
    with pytest.raises(ValueError, match=message):
        linear_label_smoothed_loss(hidden, weight, target.long(), 0.1)


def test_a_chunk_below_one_row_is_refused():
    hidden, weight, target = _inputs()
    with pytest.raises(ValueError, match="chunk_rows=0"):
        linear_label_smoothed_loss(hidden, weight, target, 0.1, chunk_rows=0)


def test_the_step_fuses_by_default_and_off_turns_it_off(monkeypatch):
    assert use_fused_linear_loss()
    monkeypatch.setattr(linear_loss, "FUSED_LINEAR_LOSS", "off")
    assert not use_fused_linear_loss()


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_training_step_gives_the_same_loss_and_gradients_fused(monkeypatch, precision):
    """A tied tiny model's step, fused and unfused: the fused path must have run (counted), and the embedding
    matrix's gradient holds both its uses (input embeddings and projection)."""
    torch.manual_seed(0)
    model = Transformer(ModelConfig.from_preset("tiny", 40, dropout=0.0))
    examples = [Example([5 + i % 30, 6 + i % 20, 7 + i], [8 + i, 9, 10 + i % 25][: 1 + i % 3]) for i in range(8)]
    batches = [collate(examples[:3]), collate(examples[3:])]
    calls = []
    monkeypatch.setattr(
        step, "linear_label_smoothed_loss", lambda *a, **k: calls.append(1) or linear_label_smoothed_loss(*a, **k)
    )

    def run(mode):
        monkeypatch.setattr(linear_loss, "FUSED_LINEAR_LOSS", mode)
        model.zero_grad(set_to_none=True)
        autocast = autocast_for(torch.device("cpu"), precision)
        loss, nll, _ = accumulate_gradients(model, batches, smoothing=0.1, autocast=autocast)
        return float(loss), float(nll), {k: p.grad.clone() for k, p in model.named_parameters()}

    off = run("off")
    assert not calls
    on = run("on")
    assert len(calls) == 2  # one per micro-batch
    tolerance = {"rtol": 1e-4, "atol": 1e-6} if precision == "fp32" else {"rtol": 3e-2, "atol": 3e-3}
    assert on[0] == pytest.approx(off[0], rel=tolerance["rtol"])
    assert on[1] == pytest.approx(off[1], rel=tolerance["rtol"])
    for name in off[2]:
        torch.testing.assert_close(on[2][name], off[2][name], **tolerance, msg=name)
