"""What the training loop records about how the model learns, through Callbacks.on_dynamics (off without it, or
with training.dynamics_every None):

    weights     model/probes/dynamics.py: each matrix's gradient, weight and update norms, at step 1 and every
                dynamics_every updates (the weights copied before the update, the norms after it)
    attention   model/probes/attention_stats.py: each head's entropy and where its weight goes, on the same
                ATTENTION_PROBE_SENTENCES validation sentences at every evaluation
    embeddings  model/probes/embeddings.py: the map of the most frequent tokens and the watched tokens' neighbours,
                at every checkpoint

and, through Callbacks.on_memory, the memory of one update measured before the first (model/train/memory_profile.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from model.data.batching import Example, TokenBatcher, collate
from model.data.tokenizer import Tokenizer
from model.decode.queries import resolve_token
from model.nn.transformer import Transformer
from model.probes.attention_stats import attention_stats
from model.probes.dynamics import DynamicsProbe
from model.probes.embeddings import EmbeddingProbe
from model.train.config import TrainConfig
from model.train.events import Callbacks
from model.train.memory_profile import memory_report
from model.train.step import PendingStep

logger = logging.getLogger(__name__)
ATTENTION_PROBE_SENTENCES = 16
# The weights' record may take at most this share of the wall-clock between two records; where it takes more (a
# fast device, a large model), the records are spaced twice as far apart from then on. bench/dynamics_cost.py
# measures what a record costs (docs/api.md, "Training dynamics").
DYNAMICS_MAX_SHARE = 0.03


class TrainingProbes:
    def __init__(
        self,
        model: Transformer,
        tokenizer: Tokenizer,
        config: TrainConfig,
        callbacks: Callbacks,
        train_examples: Callable[[], Sequence[Example]],
        valid_examples: Sequence[Example],
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.model, self.tokenizer, self.config = model, tokenizer, config
        self.dynamics_every = config.dynamics_every  # grows where recording costs more than DYNAMICS_MAX_SHARE
        self._device_type = next(model.parameters()).device.type
        self._clock = clock
        self._copy_seconds = 0.0
        self._last_record_end: float | None = None
        self.on_dynamics = callbacks.on_dynamics if config.dynamics_every is not None else None
        self.on_memory = callbacks.on_memory
        self._train_examples = train_examples
        self._valid = list(valid_examples[:ATTENTION_PROBE_SENTENCES])  # the same sentences every time
        self._weights: DynamicsProbe | None = None
        self._embeddings: EmbeddingProbe | None = None

    def measure_memory(self, batcher: TokenBatcher) -> None:
        """Callbacks.on_memory: the memory of one update on the next batch (model/train/memory_profile.py), measured on
        a copy of the model, so training is unchanged; a failure is reported as {"error": ...}, never raised."""
        if self.on_memory is None:
            return
        try:
            plan, examples = batcher.batch_indices(), batcher.examples()
            idx = plan[min(batcher.position, len(plan) - 1)]
            report = memory_report(self.model.config, collate([examples[i] for i in idx], idx), self.config)
        except Exception as exc:  # out of memory, a profiler that will not start, ...: the job trains on
            logger.warning("measuring the memory of a step failed: %s: %s", type(exc).__name__, exc)
            report = {"error": f"{type(exc).__name__}: {exc}"}
        if next(self.model.parameters()).device.type == "cuda":
            torch.cuda.empty_cache()  # the copy's blocks go back before training allocates its own
        self.on_memory(report)

    def before_update(self, step: int) -> list[Tensor] | None:
        """A copy of the weights when update `step` is to be recorded (step 1, then every dynamics_every)."""
        every = self.dynamics_every
        if self.on_dynamics is None or every is None or (step != 1 and step % every):
            return None
        start = self._clock()
        if self._weights is None:
            self._weights = DynamicsProbe(self.model)
        copy = self._weights.before()
        self._copy_seconds = self._clock() - start
        return copy

    def after_update(self, step: int, weights_before: list[Tensor] | None, pending: PendingStep) -> None:
        if weights_before is None or self._weights is None or self.on_dynamics is None:
            return
        if self._device_type == "cuda":
            torch.cuda.synchronize()  # the update's own kernels are not the record's cost
        start = self._clock()
        values = self._weights.after(weights_before, pending.grad_norm, self.config.clip_norm)  # (3, G)
        self.on_dynamics(self._weights.record(step, values.flatten().cpu().tolist()))
        end = self._clock()
        self._keep_cost_down(step, self._copy_seconds + end - start, end)

    def _keep_cost_down(self, step: int, record_seconds: float, end: float) -> None:
        """Doubles dynamics_every when this record took more than DYNAMICS_MAX_SHARE of the time since the last."""
        since, self._last_record_end = self._last_record_end, end
        if since is None or self.dynamics_every is None:
            return
        share = record_seconds / max(end - since, 1e-9)
        if share > DYNAMICS_MAX_SHARE:
            self.dynamics_every *= 2
            logger.info(
                "recording the weights' dynamics took %.1f%% of the time at step %d: every %d updates from now on",
                100 * share,
                step,
                self.dynamics_every,
            )

    def at_evaluation(self, step: int) -> None:
        if self.on_dynamics is not None and self._valid:
            self.on_dynamics(attention_stats(self.model, collate(self._valid), step))

    def at_checkpoint(self, step: int) -> None:
        if self.on_dynamics is None:
            return
        if self._embeddings is None:
            watched = []
            for token in self.config.probe_tokens or ():
                try:
                    watched.append(resolve_token(self.tokenizer, token))
                except ValueError as e:
                    logger.warning("training.probe_tokens: %s; its neighbours are not recorded", e)
            self._embeddings = EmbeddingProbe(self.tokenizer, self._train_examples(), watched)
        self.on_dynamics(self._embeddings.record(self.model, step))
