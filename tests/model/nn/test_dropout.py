"""The CPU dropout: its drop rate, its scaling, the same mask forward and backward, and reproducibility."""

import pytest
import torch

from model.nn.dropout import Dropout, dropout, scaled_mask


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_the_drop_rate_is_p_and_kept_values_are_scaled(p):
    torch.manual_seed(0)
    x = torch.ones(400, 1000)
    y = dropout(x, p, training=True)
    dropped = (y == 0).float().mean().item()
    assert dropped == pytest.approx(p, abs=0.005)  # 400k draws: the standard error is under 0.001
    assert torch.all((y == 0) | torch.isclose(y, torch.tensor(1 / (1 - p))))
    assert y.mean().item() == pytest.approx(1.0, abs=0.01)  # unbiased in expectation


def test_draws_are_independent_across_positions():
    """Neighbouring elements (which share a 64-bit random word) are not correlated."""
    torch.manual_seed(1)
    keep = (scaled_mask(torch.Size([1_000_000]), 0.5) > 0).float()
    correlation = torch.corrcoef(torch.stack([keep[:-1], keep[1:]]))[0, 1].item()
    assert abs(correlation) < 0.005


def test_backward_uses_the_forward_mask():
    torch.manual_seed(2)
    x = torch.randn(64, 128, requires_grad=True)
    y = dropout(x, 0.2, training=True)
    y.sum().backward()
    assert torch.equal(x.grad == 0, y == 0)
    assert torch.allclose(x.grad[y != 0], torch.full_like(x.grad[y != 0], 1 / 0.8))


def test_the_mask_is_in_the_input_dtype_and_the_only_tensor_saved():
    """One product each way: autograd keeps the scaled mask (not the input), and bf16 stays bf16."""
    torch.manual_seed(4)
    x = torch.randn(16, 64, requires_grad=True)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        y = dropout(x, 0.25, training=True)
    assert len(saved) == 1 and saved[0].dtype == torch.float32
    assert torch.equal(x.detach() * saved[0], y.detach())
    assert saved[0].unique().tolist() == [0.0, pytest.approx(1 / 0.75)]
    half = dropout(x.detach().bfloat16(), 0.25, training=True)
    assert half.dtype == torch.bfloat16


def test_seeded_masks_repeat_and_eval_mode_is_the_identity():
    layer = Dropout(0.1)
    x = torch.randn(32, 32)
    torch.manual_seed(3)
    a = layer(x)
    torch.manual_seed(3)
    assert torch.equal(a, layer(x))
    layer.eval()
    assert layer(x) is x
    assert torch.equal(dropout(x, 1.0, training=True), torch.zeros_like(x))
    with pytest.raises(ValueError, match="1.5"):
        Dropout(1.5)
