"""The label-smoothed loss's hand-written backward equals autograd's, and its value equals torch's."""

import pytest
import torch
import torch.nn.functional as F

from model.train.loss import label_smoothed_loss


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
