"""How the beam search learns that every sentence is done, the one thing its loop needs from the device.

On a CPU a read waits for nothing, and a step saved is worth more: EveryN(1) reads the flag after every step.
On a GPU a read waits for every step queued before it, and the next step's launches cannot start until it
returns. AsyncWatch reads nothing while the device works: after each step the flag is copied (non-blocking)
to pinned host memory and an event is recorded; the host looks at the flags whose events have completed, and
waits only when it runs more than `lag` steps ahead of the device, on the event `lag` steps back, which
leaves the later steps queued. The search thus runs at most about `lag` steps past its end, and the device
never idles for a read. Unmeasured on a GPU (docs/gpu.md).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Protocol

import torch
from torch import Tensor

LAG = 2  # steps the host may run ahead of the device; steps past the end of a search are at most about this


class Event(Protocol):
    """What AsyncWatch needs of torch.cuda.Event (tests hand in a fake)."""

    def record(self) -> None: ...
    def query(self) -> bool: ...
    def synchronize(self) -> None: ...


class EveryN:
    """Reads whether every sentence is done once every n steps (a read that waits for the device)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def all_done(self, steps: int, done: Tensor) -> bool:
        """steps: steps run so far; done (b,) bool on the device."""
        return steps % self.n == 0 and bool(done.all())


class AsyncWatch:
    """Learns whether every sentence is done from flags copied to the host as the device gets there."""

    def __init__(self, lag: int, new_event: Callable[[], Event], flags: Tensor) -> None:
        """flags: (lag + 1,) bool host tensor, pinned on a GPU host (a non-blocking copy needs it)."""
        self.lag, self.flags, self.host = lag, flags, flags.numpy()  # read through numpy: no tensor op
        self.events = [new_event() for _ in range(lag + 1)]
        self.pending: deque[int] = deque()  # slots copied and not yet looked at, oldest first

    def all_done(self, steps: int, done: Tensor) -> bool:
        slot = steps % (self.lag + 1)
        self.flags[slot : slot + 1].copy_(done.all().view(1), non_blocking=True)
        self.events[slot].record()
        self.pending.append(slot)
        while self.pending:
            oldest = self.pending[0]
            if len(self.pending) > self.lag:
                self.events[oldest].synchronize()  # too far ahead: wait for the step lag steps back
            elif not self.events[oldest].query():
                return False
            self.pending.popleft()
            if self.host[oldest]:
                return True
        return False


def pinned_flags(n: int) -> Tensor:
    return torch.zeros(n, dtype=torch.bool, pin_memory=True)


def done_watch(device: torch.device, check_every: int | None) -> EveryN | AsyncWatch:
    """check_every given: a read every that many steps, anywhere. Otherwise every step on a CPU, and without
    waiting (AsyncWatch) on a GPU."""
    if check_every is not None or device.type != "cuda":
        return EveryN(check_every or 1)
    return AsyncWatch(LAG, torch.cuda.Event, pinned_flags(LAG + 1))
