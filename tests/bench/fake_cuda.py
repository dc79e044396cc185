"""A GPU for a CPU-only machine: torch.cuda's device queries answer as an H100 would, and record the calls.

The benchmarks' CUDA probe (bench.gpu_info.CudaProbe) then runs its real code, while the tensors stay on the
CPU; nothing here claims a GPU speed, it only lets the GPU-only branches run and be checked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest
import torch

from bench.gpu_info import CudaProbe

H100_NAME = "NVIDIA H100 80GB HBM3"
H100_MEMORY = 85_045_870_592  # bytes, as torch reports an H100 SXM 80GB


@dataclass
class FakeCuda:
    name: str = H100_NAME
    total_memory: int = H100_MEMORY
    calls: list[str] = field(default_factory=list)
    peaks: list[int] = field(default_factory=list)  # every value max_memory_allocated returned, in order

    def install(self, monkeypatch: pytest.MonkeyPatch) -> CudaProbe:
        """Patch torch.cuda's queries and return the benchmarks' probe for cuda:0."""

        def get_device_properties(device: torch.device) -> SimpleNamespace:
            self.calls.append("get_device_properties")
            return SimpleNamespace(name=self.name, total_memory=self.total_memory)

        def synchronize(device: torch.device) -> None:
            self.calls.append("synchronize")

        def reset_peak_memory_stats(device: torch.device) -> None:
            self.calls.append("reset_peak_memory_stats")

        def max_memory_allocated(device: torch.device) -> int:
            self.calls.append("max_memory_allocated")
            self.peaks.append(1_000_000 * (len(self.peaks) + 1))  # a different peak each time
            return self.peaks[-1]

        monkeypatch.setattr(torch.cuda, "get_device_properties", get_device_properties)
        monkeypatch.setattr(torch.cuda, "synchronize", synchronize)
        monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", reset_peak_memory_stats)
        monkeypatch.setattr(torch.cuda, "max_memory_allocated", max_memory_allocated)
        return CudaProbe(torch.device("cuda", 0))
