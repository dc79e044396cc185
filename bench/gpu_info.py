"""What the benchmarks ask of the device they time: its name and memory, a barrier, peak memory, and the
GPU's bf16 dense peak for MFU.

A probe wraps the device-only calls (torch.cuda.synchronize, max_memory_allocated, ...) so that the timing
code is the same on every device, and so that the CUDA branch can be driven on a CPU-only machine by handing
the benchmark a probe whose torch.cuda functions report a fake GPU.
"""

from __future__ import annotations

import platform
import re
from dataclasses import dataclass
from typing import Protocol

import torch

# bf16 dense tensor-core peak (no 2:4 sparsity) in TFLOPS, from the vendors' datasheets. First match wins, so
# the more specific name comes first ("A100" before "A10", "H100 PCIe" before the SXM names). torch reports
# e.g. "NVIDIA H100 80GB HBM3" (SXM), "NVIDIA H100 PCIe", "NVIDIA A100-SXM4-80GB", "NVIDIA GeForce RTX 4090".
# A GPU not listed (H100 NVL, L40S, ...) has no peak: MFU is then null unless --peak-tflops gives one.
PEAK_BF16_TFLOPS: tuple[tuple[str, float], ...] = (
    (r"H100.*PCIe", 756.0),
    (r"H100.*(SXM|HBM3)", 989.0),
    (r"H200", 989.0),
    (r"A100", 312.0),
    (r"\bL4\b", 121.0),
    (r"\bA10\b", 125.0),
    (r"RTX 4090", 165.0),
)


def peak_bf16_tflops(device_name: str, override: float | None = None) -> float | None:
    """The bf16 dense peak of a GPU by its name (PEAK_BF16_TFLOPS), or `override` when given; None if unknown."""
    if override is not None:
        if not override > 0:
            raise ValueError(f"peak TFLOPS override={override!r} must be positive")
        return override
    for pattern, tflops in PEAK_BF16_TFLOPS:
        if re.search(pattern, device_name, flags=re.IGNORECASE):
            return tflops
    return None


@dataclass(frozen=True)
class DeviceInfo:
    """The device a benchmark ran on, under the names the workers' heartbeat uses."""

    device_kind: str  # "cpu" | "cuda"
    device_name: str  # the GPU's name, or the CPU's architecture
    device_memory_total: int | None  # bytes; None on a CPU


class DeviceProbe(Protocol):
    def describe(self) -> DeviceInfo: ...

    def synchronize(self) -> None:
        """Wait until every queued kernel has finished, so a wall-clock reading covers the work."""

    def reset_peak_memory(self) -> None: ...

    def max_memory_allocated(self) -> int | None:
        """Peak bytes held by tensors since the last reset; None where the device does not count them."""


class CpuProbe:
    """A CPU runs synchronously and has no tensor-memory counter."""

    def describe(self) -> DeviceInfo:
        return DeviceInfo("cpu", platform.processor() or platform.machine(), None)

    def synchronize(self) -> None:
        pass

    def reset_peak_memory(self) -> None:
        pass

    def max_memory_allocated(self) -> int | None:
        return None


class CudaProbe:
    """One CUDA device through torch.cuda."""

    def __init__(self, device: torch.device) -> None:
        if device.type != "cuda":
            raise ValueError(f"CudaProbe needs a cuda device, got {device}")
        self.device = device

    def describe(self) -> DeviceInfo:
        props = torch.cuda.get_device_properties(self.device)
        return DeviceInfo("cuda", props.name, int(props.total_memory))

    def synchronize(self) -> None:
        torch.cuda.synchronize(self.device)

    def reset_peak_memory(self) -> None:
        torch.cuda.reset_peak_memory_stats(self.device)

    def max_memory_allocated(self) -> int | None:
        return int(torch.cuda.max_memory_allocated(self.device))


def probe_for(device: torch.device) -> DeviceProbe:
    if device.type == "cuda":
        return CudaProbe(device)
    if device.type == "cpu":
        return CpuProbe()
    raise ValueError(f"device={device} is not supported by the benchmarks; use cpu, cuda or cuda:N")
