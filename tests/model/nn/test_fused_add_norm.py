"""The fused residual + dropout + layer norm (model/nn/fused_add_norm.py) against the unfused path, on the CPU under
Triton's interpreter (TRITON_INTERPRET=1, tests/conftest.py): the same outputs and gradients, dropout included (the
kernel's own mask, drawn again from its seed), in fp32 and bf16, and a model whose post-norm layers run it computes
the same loss and gradients as the unfused model."""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import cast

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor

pytest.importorskip("triton")  # a dev dependency: installed wherever the tests run

from model.nn import fused_add_norm, layers  # noqa: E402
from model.nn.config import ModelConfig  # noqa: E402
from model.nn.transformer import Transformer  # noqa: E402

EPS = 1e-5


def unfused(x: Tensor, residual: Tensor, weight: Tensor, bias: Tensor, keep: Tensor | None, p: float) -> Tensor:
    dropped = x if keep is None else torch.where(keep, x / (1 - p), 0.0)
    summed = (residual + dropped).to(torch.promote_types(x.dtype, residual.dtype))
    return F.layer_norm(summed.float(), weight.shape, weight, bias, EPS)


def inputs(shape: tuple[int, ...], dtype: torch.dtype) -> list[Tensor]:
    g = torch.Generator().manual_seed(7)
    x, residual = (torch.randn(shape, generator=g).to(dtype).requires_grad_() for _ in range(2))
    weight = (1 + 0.1 * torch.randn(shape[-1], generator=g)).requires_grad_()
    bias = (0.1 * torch.randn(shape[-1], generator=g)).requires_grad_()
    return [x, residual, weight, bias]


def grads(out: Tensor, dy: Tensor, tensors: list[Tensor]) -> list[Tensor]:
    return [cast(Tensor, g) for g in torch.autograd.grad(out, tensors, dy)]


def test_the_kernels_run_under_the_interpreter() -> None:
    assert os.environ.get("TRITON_INTERPRET") == "1"


@pytest.mark.parametrize("p", [0.0, 0.3])
def test_outputs_and_gradients_equal_the_unfused_path_with_the_same_mask(p: float) -> None:
    shape = (3, 5, 48)  # 15 rows over 8 backward programs, a row narrower than its block of 64
    x, residual, weight, bias = tensors = inputs(shape, torch.float32)
    seed = 1234
    keep = fused_add_norm.keep_mask(seed, torch.Size(shape), p, x.device) if p else None
    fused = fused_add_norm.add_norm(x, residual, weight, bias, p, EPS, torch.float32, seed=seed)
    expected = unfused(x, residual, weight, bias, keep, p)
    torch.testing.assert_close(fused, expected, atol=1e-5, rtol=1e-5)
    dy = torch.randn(shape, generator=torch.Generator().manual_seed(3))
    got = grads(fused, dy, tensors)
    for g, want in zip(got, grads(expected, dy, tensors), strict=True):
        torch.testing.assert_close(g, want, atol=1e-5, rtol=1e-4)
    if keep is not None:
        assert torch.equal(got[0] == 0, ~keep)  # dropped elements get no gradient, the others some


def test_in_bf16_within_bf16_tolerance() -> None:
    shape = (4, 6, 40)
    x, residual, weight, bias = tensors = inputs(shape, torch.bfloat16)
    keep = fused_add_norm.keep_mask(99, torch.Size(shape), 0.1, x.device)
    fused = fused_add_norm.add_norm(x, residual, weight, bias, 0.1, EPS, torch.bfloat16, seed=99)
    expected = unfused(x, residual, weight, bias, keep, 0.1)
    assert fused.dtype == torch.bfloat16
    torch.testing.assert_close(fused.float(), expected, atol=3e-2, rtol=2e-2)
    dy = torch.randn(shape, generator=torch.Generator().manual_seed(5))
    got, want = grads(fused, dy.bfloat16(), tensors), grads(expected, dy, tensors)
    assert [g.dtype for g in got] == [torch.bfloat16, torch.bfloat16, torch.float32, torch.float32]
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g.float(), w.float(), atol=6e-2, rtol=3e-2)


def test_the_mask_drops_p_of_the_elements_and_torch_manual_seed_repeats_it() -> None:
    keep = fused_add_norm.keep_mask(5, torch.Size((64, 256)), 0.25, torch.device("cpu"))
    assert abs((~keep).float().mean().item() - 0.25) < 0.01
    x, residual, weight, bias = inputs((8, 32), torch.float32)

    def run(seed: int) -> Tensor:
        torch.manual_seed(seed)
        return fused_add_norm.add_norm(x, residual, weight, bias, 0.5, EPS, torch.float32)

    assert torch.equal(run(0), run(0)) and not torch.equal(run(0), run(1))


def test_bad_probabilities_and_shapes_are_named() -> None:
    x, residual, weight, bias = inputs((2, 16), torch.float32)
    with pytest.raises(ValueError, match=r"dropout probability must be in \[0, 1\), got 1.0"):
        fused_add_norm.add_norm(x, residual, weight, bias, 1.0, EPS, torch.float32)
    with pytest.raises(ValueError, match=r"shapes differ: x \(2, 16\), residual \(2, 8\)"):
        fused_add_norm.add_norm(x, residual[:, :8], weight, bias, 0.1, EPS, torch.float32)


def test_auto_fuses_training_on_a_cuda_tensor_only(monkeypatch: pytest.MonkeyPatch) -> None:
    cuda = cast(Tensor, SimpleNamespace(is_cuda=True))  # what a GPU's tensor reports
    assert layers.FUSED_ADD_NORM == "auto"
    assert layers.use_fused_add_norm(cuda, training=True)
    assert not layers.use_fused_add_norm(cuda, training=False)  # decoding keeps its own path
    assert not layers.use_fused_add_norm(torch.zeros(1), training=True)
    monkeypatch.setattr(layers, "_triton_installed", lambda: False)
    assert not layers.use_fused_add_norm(cuda, training=True)
    monkeypatch.setattr(layers, "FUSED_ADD_NORM", "off")
    assert not layers.use_fused_add_norm(cuda, training=True)


def test_autocast_keeps_the_unfused_dtypes() -> None:
    assert layers.norm_dtype("cpu", torch.float32) == torch.float32
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert layers.norm_dtype("cpu", torch.bfloat16) == torch.bfloat16
        x = torch.randn(3, 8, dtype=torch.bfloat16)
        assert layers.norm_dtype("cpu", x.dtype) == layers.to_residual_dtype(F.layer_norm(x, (8,))).dtype


def test_a_post_norm_model_computes_the_same_loss_and_gradients_fused(monkeypatch: pytest.MonkeyPatch) -> None:
    config = ModelConfig.from_preset("tiny", 40, d_model=32, d_ff=64, dropout=0.0)
    torch.manual_seed(0)
    model = Transformer(config)
    src = torch.randint(3, 40, (2, 7))
    tgt = torch.randint(3, 40, (2, 6))

    calls: list[int] = []
    kernel = fused_add_norm.add_norm

    def counted(*args: object, **kwargs: object) -> Tensor:
        calls.append(1)
        return kernel(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(fused_add_norm, "add_norm", counted)

    def loss_and_grads(mode: str) -> tuple[Tensor, dict[str, Tensor]]:
        monkeypatch.setattr(layers, "FUSED_ADD_NORM", mode)
        model.zero_grad()
        logits = model(src, tgt[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, 40), tgt[:, 1:].reshape(-1))
        loss.backward()
        return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    fused_loss, fused_grads = loss_and_grads("on")
    assert len(calls) == 2 * 2 + 2 * 3  # every sub-layer of the 2 encoder and 2 decoder layers
    loss, expected = loss_and_grads("off")
    assert len(calls) == 10
    torch.testing.assert_close(fused_loss, loss, atol=1e-5, rtol=1e-5)
    assert fused_grads.keys() == expected.keys() and any("layer_norm" in n for n in expected)
    for name, grad in expected.items():
        torch.testing.assert_close(fused_grads[name], grad, atol=1e-5, rtol=1e-4, msg=name)


def test_backward_rows_per_program_follow_the_gpus_multiprocessors(monkeypatch: pytest.MonkeyPatch) -> None:
    """What an H100 reports (132 multiprocessors): about four programs each, rows a power of two covering all."""
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: SimpleNamespace(multi_processor_count=132))
    for n_rows, expected in ((1, 1), (528, 1), (529, 2), (25_000, 64)):
        rows = fused_add_norm._rows_per_program(torch.device("cuda"), n_rows)
        assert rows == expected and rows & (rows - 1) == 0 and rows * -(-n_rows // rows) >= n_rows
