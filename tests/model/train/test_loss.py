"""The label-smoothed loss's hand-written backward equals autograd's, and its value equals torch's."""

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from model.train.loss import label_smoothed_loss, rows_per_chunk


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.3])
def test_value_and_gradient_match_torch_cross_entropy(smoothing):
    torch.manual_seed(0)
    logits = torch.randn(37, 50, dtype=torch.float64, requires_grad=True)
    target = torch.randint(0, 50, (37,))
    loss, nll = label_smoothed_loss(logits, target, smoothing)
    (2.5 * loss).backward()
    ours = logits.grad.clone()

    logits.grad = None
    reference = F.cross_entropy(logits, target, label_smoothing=smoothing, reduction="sum")
    (2.5 * reference).backward()
    assert loss.item() == pytest.approx(reference.item(), rel=1e-12)
    assert nll.item() == pytest.approx(F.cross_entropy(logits, target, reduction="sum").item(), rel=1e-12)
    assert torch.allclose(ours, logits.grad, atol=1e-12)


def test_gradient_through_both_outputs_is_their_sum():
    """When the NLL is also used in the graph, its gradient adds to the smoothed loss's."""
    torch.manual_seed(1)
    logits = torch.randn(8, 20, dtype=torch.float64, requires_grad=True)
    target = torch.randint(0, 20, (8,))
    assert torch.autograd.gradcheck(lambda x: sum(label_smoothed_loss(x, target, 0.1)), (logits,))


def test_a_second_backward_through_a_retained_graph_gives_the_same_gradient():
    logits = torch.randn(4, 6, requires_grad=True)
    loss, _ = label_smoothed_loss(logits, torch.tensor([0, 1, 2, 3]), 0.1)
    first = torch.autograd.grad(loss, logits, retain_graph=True)[0]
    assert torch.equal(torch.autograd.grad(loss, logits)[0], first)


def test_under_bf16_logits_the_gradient_comes_back_in_their_dtype():
    logits = torch.randn(5, 9).to(torch.bfloat16).requires_grad_()
    loss, _ = label_smoothed_loss(logits, torch.tensor([1, 2, 3, 4, 5]), 0.1)
    loss.backward()
    assert logits.grad.dtype == torch.bfloat16 and torch.isfinite(logits.grad.float()).all()


def _reference(logits, target, smoothing, weight=None):
    """torch's cross entropy on float64 copies: (loss, nll, d loss / d logits)."""
    x = logits.detach().double().requires_grad_()
    w = None if weight is None else weight.double()
    loss_rows = F.cross_entropy(x, target, label_smoothing=smoothing, reduction="none")
    nll_rows = F.cross_entropy(x, target, reduction="none")
    if w is not None:
        loss_rows, nll_rows = loss_rows * w, nll_rows * w
    loss_rows.sum().backward()
    return loss_rows.sum().item(), nll_rows.sum().item(), x.grad


@pytest.mark.parametrize("chunk_rows", [None, 7, 64])
def test_bf16_logits_give_the_fp32_values_and_gradient_chunk_by_chunk(chunk_rows):
    torch.manual_seed(2)
    logits = (3 * torch.randn(50, 301)).to(torch.bfloat16).requires_grad_()
    target = torch.randint(0, 301, (50,))
    loss, nll = label_smoothed_loss(logits, target, 0.1, chunk_rows=chunk_rows)
    loss.backward()
    ref_loss, ref_nll, ref_grad = _reference(logits, target, 0.1)
    assert loss.dtype == torch.float32 and logits.grad.dtype == torch.bfloat16
    assert loss.item() == pytest.approx(ref_loss, rel=1e-5)
    assert nll.item() == pytest.approx(ref_nll, rel=1e-5)
    # one bf16 rounding of each gradient entry: 2^-8 of its size
    assert torch.allclose(logits.grad.double(), ref_grad, rtol=2**-8, atol=1e-6)


def test_row_weights_ignore_rows_like_dropping_them():
    torch.manual_seed(3)
    logits = torch.randn(12, 40, dtype=torch.float64, requires_grad=True)
    target = torch.randint(0, 40, (12,))
    weight = (torch.arange(12) % 3 != 0).to(torch.float64)
    loss, nll = label_smoothed_loss(logits, target, 0.1, weight=weight, chunk_rows=5)
    loss.backward()
    ref_loss, ref_nll, ref_grad = _reference(logits, target, 0.1, weight)
    assert loss.item() == pytest.approx(ref_loss, rel=1e-12)
    assert nll.item() == pytest.approx(ref_nll, rel=1e-12)
    assert torch.allclose(logits.grad, ref_grad, atol=1e-12)
    assert logits.grad[0].abs().sum() == 0  # a weight-0 row gets no gradient


class _RecordOutputs(TorchDispatchMode):
    """Records (shape, dtype) of every tensor each operator returns."""

    def __init__(self):
        super().__init__()
        self.outputs = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                self.outputs.append((tuple(t.shape), t.dtype))
        return out


def test_bf16_logits_are_never_copied_to_fp32_whole():
    """Forward and backward on bf16 (N, V) logits: no operator returns an fp32 tensor of N rows by V, only
    chunks of chunk_rows rows, and the gradient is one bf16 (N, V) buffer."""
    n, vocab, chunk = 64, 500, 16
    logits = torch.randn(n, vocab).to(torch.bfloat16).requires_grad_()
    target = torch.randint(0, vocab, (n,))
    with _RecordOutputs() as recorded:
        loss, _ = label_smoothed_loss(logits, target, 0.1, chunk_rows=chunk)
        loss.backward()
    fp32_rows = [shape[0] for shape, dtype in recorded.outputs if dtype == torch.float32 and len(shape) == 2]
    assert fp32_rows and max(fp32_rows) <= chunk
    assert logits.grad.shape == (n, vocab) and logits.grad.dtype == torch.bfloat16


def test_the_default_chunk_bounds_the_fp32_buffer_by_elements(monkeypatch):
    monkeypatch.setattr("model.train.loss.CHUNK_ELEMENTS", 1000)
    logits = torch.randn(30, 300).to(torch.bfloat16).requires_grad_()
    with _RecordOutputs() as recorded:
        label_smoothed_loss(logits, torch.randint(0, 300, (30,)), 0.1)[0].backward()
    fp32 = [shape for shape, dtype in recorded.outputs if dtype == torch.float32 and len(shape) == 2]
    assert fp32 and all(rows * cols <= 1000 for rows, cols in fp32)


def test_fp32_logits_stay_one_chunk():
    """No copy to bound on fp32 logits: the rows go through as one chunk, as before chunking existed."""
    assert rows_per_chunk(torch.empty(10_000, 37_000, device="meta")) == 10_000
    assert rows_per_chunk(torch.empty(10_000, 37_000, dtype=torch.bfloat16, device="meta")) == (1 << 24) // 37_000
