"""Settings chosen from a time budget: vocabulary, batch size, warm-up and step limit for a job that gives
`max_minutes` and leaves them out.

Pure and torch-free: the worker measures the corpus and its own throughput (model/train/throughput.py) and passes
the numbers in, so the same corpus, budget and throughput always give the same choice.

The rules below; the runs that set their constants are in docs/learning-efficiency.md ("Settings from a time
budget"):
- Vocabulary by corpus size: small corpora train better with small vocabularies (Ding et al., 2019, "A Call
  for Prudent Choice of Subword Merge Operations"; Sennrich and Zhang, 2019).
- Batch size and number of updates both grow as the square root of the batch tokens the budget affords
  (the gradient noise scale, hence the useful batch, grows as the loss falls: McCandlish et al., 2018).
  BATCH_CONSTANT puts the batch where a 20-minute run of `small` on a CPU trained best.
- Batches of at least MIN_BATCH_TOKENS, warmed up over at least MIN_WARMUP_TOKENS batch tokens. A smaller batch
  wants a lower peak (the square-root rule: Krizhevsky, 2014; Hoffer et al., 2017), and the paper's rate peaks
  lower the longer the warm-up, so the floor is in tokens. Below both floors a short run stalled.
- Warm-up a fifth of the expected updates, within [MIN_WARMUP, MAX_WARMUP] (the paper: 4000).
- The step limit out of the way: the time budget binds.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

# Fields a job may leave to the budget: (section of the job spec, name).
AUTO_FIELDS: dict[str, str] = {
    "vocab_size": "model",
    "max_tokens_per_batch": "training",
    "warmup_steps": "training",
    "max_steps": "training",
}
# (fewer training pairs than, vocabulary): the last one applies above every bound.
VOCABULARY_BY_PAIRS: tuple[tuple[int, int], ...] = (
    (20_000, 2_000),
    (100_000, 4_000),
    (400_000, 8_000),
    (1_500_000, 16_000),
)
LARGEST_VOCABULARY = 32_000
BATCH_CONSTANT = 0.75  # batch tokens = sqrt(BATCH_CONSTANT x batch tokens in the budget)
MIN_BATCH_TOKENS = 1_536  # below this the paper's rate is too noisy (Popel and Bojar, 2018)
MAX_BATCH_TOKENS = 65_536
BATCH_MULTIPLE = 128
WARMUP_FRACTION = 0.2
MIN_WARMUP, MAX_WARMUP = 100, 4_000
MIN_WARMUP_TOKENS = 600_000  # batch tokens before the rate peaks: 400 updates of 1,536 tokens
TIME_BINDS_STEPS = 1_000_000
OVERHEAD = 0.03  # share of the budget lost to checkpoints, logging and the first batches


@dataclass(frozen=True)
class BudgetInputs:
    """What the choice depends on; recorded with it so that it can be checked and reproduced."""

    max_minutes: float
    training_pairs: int  # sentence pairs (or sentences, for denoising) in the training data
    longest_example: int = 0  # tokens of the longest training example (its longer side + 1); 0 before tokenizing
    tokens_per_second: float = 0.0  # batch tokens (max_tokens_per_batch units) per second per device; 0: unknown
    devices: int = 1
    grad_accum_steps: int = 1
    eval_budget: float | None = 0.05
    max_batch_tokens: int = MAX_BATCH_TOKENS  # what fits in the worker's memory

    def __post_init__(self) -> None:
        if not self.max_minutes > 0:
            raise ValueError(f"max_minutes={self.max_minutes} must be positive")
        if self.training_pairs < 0 or self.longest_example < 0 or self.tokens_per_second < 0:
            raise ValueError(
                f"training_pairs={self.training_pairs}, longest_example={self.longest_example} and "
                f"tokens_per_second={self.tokens_per_second} cannot be negative"
            )
        if self.devices < 1 or self.grad_accum_steps < 1:
            raise ValueError(f"devices={self.devices} and grad_accum_steps={self.grad_accum_steps} must be >= 1")


@dataclass(frozen=True)
class BudgetChoice:
    chosen: dict[str, int]
    reasons: dict[str, str]
    inputs: dict[str, Any] = field(default_factory=dict)
    expected_updates: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def choose_vocabulary(training_pairs: int) -> tuple[int, str]:
    for bound, size in VOCABULARY_BY_PAIRS:
        if training_pairs < bound:
            return size, (
                f"{training_pairs:,} training pairs (fewer than {bound:,}): a vocabulary of {size:,}; "
                f"small corpora learn faster with small vocabularies"
            )
    return LARGEST_VOCABULARY, f"{training_pairs:,} training pairs: the largest automatic vocabulary"


def training_seconds(inputs: BudgetInputs) -> float:
    """The budget less evaluation and overhead: the seconds that go to updates."""
    return inputs.max_minutes * 60 * (1 - (inputs.eval_budget or 0) - OVERHEAD)


def choose_batch(inputs: BudgetInputs) -> tuple[int, int, str]:
    """(max_tokens_per_batch per device, expected updates, why)."""
    seconds = training_seconds(inputs)
    per_update = inputs.devices * inputs.grad_accum_steps  # batches of max_tokens_per_batch in one update
    budget_tokens = inputs.tokens_per_second * inputs.devices * seconds
    smallest = min(max(MIN_BATCH_TOKENS, inputs.longest_example), inputs.max_batch_tokens)
    if budget_tokens <= 0:
        raise ValueError("tokens_per_second is needed to choose max_tokens_per_batch")
    ideal = math.sqrt(BATCH_CONSTANT * budget_tokens) / per_update
    batch = int(round(ideal / BATCH_MULTIPLE)) * BATCH_MULTIPLE
    batch = max(smallest, min(batch, inputs.max_batch_tokens))
    updates = max(1, int(budget_tokens / (batch * per_update)))
    why = (
        f"{inputs.tokens_per_second:,.0f} batch tokens/s measured x {inputs.devices} device(s) x "
        f"{seconds:,.0f} s of training = {budget_tokens / 1e6:,.2f}M batch tokens: {batch:,}-token batches give "
        f"about {updates:,} updates (batch and updates both grow as the square root of the budget)"
    )
    if batch == smallest and ideal < smallest:
        why += f"; raised to the smallest batch, {smallest:,}"
    if batch == inputs.max_batch_tokens and ideal > batch:
        why += f"; capped at {batch:,}, what fits in the worker's memory"
    return batch, updates, why


def choose_warmup(updates: int, batch_tokens: int) -> tuple[int, str]:
    """A fifth of the expected updates, and at least MIN_WARMUP_TOKENS batch tokens (batch_tokens a update),
    rounded to 50 within [MIN_WARMUP, MAX_WARMUP]."""
    fifth = int(round(updates * WARMUP_FRACTION / 50)) * 50
    by_tokens = math.ceil(MIN_WARMUP_TOKENS / batch_tokens / 50) * 50
    warmup = max(MIN_WARMUP, min(MAX_WARMUP, max(fifth, by_tokens)))
    why = f"about a fifth of the {updates:,} expected updates"
    if by_tokens > fifth:
        why = (
            f"{by_tokens:,} updates of {batch_tokens:,} tokens: at least {MIN_WARMUP_TOKENS:,} batch tokens before "
            f"the rate peaks (more than a fifth of the {updates:,} expected updates)"
        )
    return warmup, f"{why}, within [{MIN_WARMUP}, {MAX_WARMUP}]"


def choose(
    fields: list[str] | tuple[str, ...], inputs: BudgetInputs, fixed: dict[str, int] | None = None
) -> BudgetChoice:
    """Values for `fields` (names of AUTO_FIELDS). `fixed` holds the values of the others the user gave (a
    chosen warm-up needs the batch size, chosen or not)."""
    unknown = sorted(set(fields) - set(AUTO_FIELDS))
    if unknown:
        raise ValueError(f"cannot choose {unknown}; automatic fields are {sorted(AUTO_FIELDS)}")
    fixed = dict(fixed or {})
    chosen: dict[str, int] = {}
    reasons: dict[str, str] = {}
    if "vocab_size" in fields:
        chosen["vocab_size"], reasons["vocab_size"] = choose_vocabulary(inputs.training_pairs)
    updates = None
    if "max_tokens_per_batch" in fields:
        batch, updates, reasons["max_tokens_per_batch"] = choose_batch(inputs)
        chosen["max_tokens_per_batch"] = batch
    elif "warmup_steps" in fields and inputs.tokens_per_second > 0:
        batch = fixed["max_tokens_per_batch"]
        updates = max(1, int(inputs.tokens_per_second * training_seconds(inputs) / (batch * inputs.grad_accum_steps)))
    if "warmup_steps" in fields:
        if updates is None:
            raise ValueError("tokens_per_second is needed to choose warmup_steps")
        per_update = batch * inputs.grad_accum_steps * inputs.devices
        chosen["warmup_steps"], reasons["warmup_steps"] = choose_warmup(updates, per_update)
    if "max_steps" in fields:
        chosen["max_steps"] = TIME_BINDS_STEPS
        reasons["max_steps"] = f"max_minutes={inputs.max_minutes:g} binds; the step limit is set out of its way"
    return BudgetChoice(chosen, reasons, asdict(inputs), updates)


def largest_batch(fits: Callable[[int], bool], upper: int = MAX_BATCH_TOKENS) -> int:
    """The largest multiple of BATCH_MULTIPLE up to `upper` for which fits(tokens) holds (fits grows
    monotonically false); BATCH_MULTIPLE when none does."""
    lo, hi = 1, upper // BATCH_MULTIPLE
    if fits(hi * BATCH_MULTIPLE):
        return hi * BATCH_MULTIPLE
    while lo < hi:  # invariant: fits(lo) or lo == 1; not fits(hi)
        mid = (lo + hi) // 2
        if mid == lo:
            break
        if fits(mid * BATCH_MULTIPLE):
            lo = mid
        else:
            hi = mid
    return lo * BATCH_MULTIPLE
