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
- On a device whose throughput grows with the batch (a GPU), at least the knee of the measured throughput curve:
  the smallest batch past which tokens/s grows by less than KNEE_GAIN per doubling. Below it the device idles
  and a larger batch costs no updates; the square-root rule's batch still applies when it is larger.
- Warm-up a fifth of the expected updates, within [MIN_WARMUP, MAX_WARMUP] (the paper: 4000). The peak rate,
  d_model^-0.5 * warmup^-0.5 (Eq. 3), so follows the batch: a batch k times larger gets k times fewer warm-up
  updates by either bound and a sqrt(k) times higher peak, the square-root rule, until MIN_WARMUP binds.
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
# Past the knee tokens/s grows by less than 15% per doubling of the batch. With a step's time a fixed cost c
# (kernel launches, the optimizer, the host) plus tokens / peak, tokens/s at b is peak * b / (b + b0), b0 = peak * c,
# and a doubling gains less than 15% once b > 2.8 b0, at 74% of the peak: going on to 90% would take 3.2 times
# the batch (3.2 times fewer updates) for 1.2 times the tokens.
KNEE_GAIN = 1.15

# (batch tokens, batch tokens per second) measured at each batch size, ascending.
Curve = tuple[tuple[int, float], ...]


@dataclass(frozen=True)
class BudgetInputs:
    """What the choice depends on; recorded with it so that it can be checked and reproduced."""

    max_minutes: float
    training_pairs: int  # sentence pairs (or sentences, for denoising) in the training data
    longest_example: int = 0  # tokens of the longest training example (its longer side + 1); 0 before tokenizing
    # Batch tokens (max_tokens_per_batch units) per second per device; 0: unknown. With a curve: its first point's.
    tokens_per_second: float = 0.0
    devices: int = 1
    grad_accum_steps: int = 1
    eval_budget: float | None = 0.05
    max_batch_tokens: int = MAX_BATCH_TOKENS  # what fits in the worker's memory
    # tokens_per_second at several batch sizes (a GPU's): the rule then reads the throughput at each batch from it
    # and chooses at least its knee. Empty: tokens_per_second at every batch size (a CPU's).
    throughput_curve: Curve = ()
    languages: int = 2  # a model of several pairs: the distinct languages of its pairs, which share its vocabulary

    def __post_init__(self) -> None:
        # Recorded as JSON lists; read back as the tuples the rule takes.
        object.__setattr__(self, "throughput_curve", tuple((int(b), float(t)) for b, t in self.throughput_curve))
        batches = [b for b, _ in self.throughput_curve]
        if batches != sorted(set(batches)) or any(b <= 0 or not t > 0 for b, t in self.throughput_curve):
            raise ValueError(
                f"throughput_curve={self.throughput_curve} needs positive tokens/s at distinct, ascending, positive "
                f"batch sizes"
            )
        if not self.max_minutes > 0:
            raise ValueError(f"max_minutes={self.max_minutes} must be positive")
        if self.training_pairs < 0 or self.longest_example < 0 or self.tokens_per_second < 0:
            raise ValueError(
                f"training_pairs={self.training_pairs}, longest_example={self.longest_example} and "
                f"tokens_per_second={self.tokens_per_second} cannot be negative"
            )
        if self.devices < 1 or self.grad_accum_steps < 1:
            raise ValueError(f"devices={self.devices} and grad_accum_steps={self.grad_accum_steps} must be >= 1")

    def throughput_at(self, batch: int) -> float:
        """Batch tokens per second per device at `batch`-token batches: tokens_per_second, or on a curve a power
        law between its neighbours, flat past its ends (no growth assumed beyond what was measured)."""
        curve = self.throughput_curve
        if not curve:
            return self.tokens_per_second
        if batch <= curve[0][0]:
            return curve[0][1]
        for (b0, t0), (b1, t1) in zip(curve, curve[1:], strict=False):
            if batch <= b1:
                return t0 * float((t1 / t0) ** (math.log(batch / b0) / math.log(b1 / b0)))
        return curve[-1][1]


@dataclass(frozen=True)
class BudgetChoice:
    chosen: dict[str, int]
    reasons: dict[str, str]
    inputs: dict[str, Any] = field(default_factory=dict)
    expected_updates: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def choose_vocabulary(training_pairs: int, languages: int = 2) -> tuple[int, str]:
    """The vocabulary for a corpus of `training_pairs`; a model of several pairs (`languages` of them, sources and
    targets) shares it among them, so it grows by languages / 2: each language keeps about the subwords a model of
    one pair gets from a corpus of that size (multilingual models share larger vocabularies than bilingual ones:
    Johnson et al., 2017; Arivazhagan et al., 2019; Conneau et al., 2020 on the cost of one too small)."""
    if languages < 2:
        raise ValueError(f"languages={languages}: a translation corpus has at least 2")
    size, why = LARGEST_VOCABULARY, f"{training_pairs:,} training pairs: the largest automatic vocabulary"
    for bound, by_pairs in VOCABULARY_BY_PAIRS:
        if training_pairs < bound:
            size = by_pairs
            why = (
                f"{training_pairs:,} training pairs (fewer than {bound:,}): a vocabulary of {size:,}; "
                f"small corpora learn faster with small vocabularies"
            )
            break
    if languages == 2:
        return size, why
    shared = min(LARGEST_VOCABULARY, round(size * languages / 2 / 1000) * 1000)
    return shared, f"{why}; {languages} languages share it: {shared:,}, {languages}/2 times as many"


# Below REFERENCE_BATCH tokens an update, the paper's rate is scaled by sqrt(batch / REFERENCE_BATCH): the square-root
# rule (Krizhevsky, 2014; Hoffer et al., 2017; for the Transformer, Popel and Bojar, 2018), since a smaller batch's
# gradient is noisier. Measured on the 2-core CPU, the reverse job of bench/backtranslation.py in process (fr-en,
# 10,000 gettext pairs, `small`, 1,536-token batches, warm-up 400, seed 1; the service's job gave the same losses to
# the third decimal): at scale 1.0 the mean training loss over updates 401-500 stalled at 4.66 and the job ended at
# 0.3 BLEU; at 0.7, 3.84. Post-norm Transformers are known to stall at too high a rate (Liu et al., 2020).
REFERENCE_BATCH = 3_072


def batch_lr_scale(batch_tokens: int) -> float:
    """The default scale of the paper's rate for updates of `batch_tokens` tokens (all devices and accumulated
    micro-batches together): sqrt(batch_tokens / REFERENCE_BATCH) below the reference, 1 from it on (2 decimals)."""
    if batch_tokens < 1:
        raise ValueError(f"batch_tokens={batch_tokens} must be >= 1")
    return round(min(1.0, math.sqrt(batch_tokens / REFERENCE_BATCH)), 2)


def training_seconds(inputs: BudgetInputs) -> float:
    """The budget less evaluation and overhead: the seconds that go to updates."""
    return inputs.max_minutes * 60 * (1 - (inputs.eval_budget or 0) - OVERHEAD)


def gain_per_doubling(a: tuple[int, float], b: tuple[int, float]) -> float:
    """How many times tokens/s grows per doubling of the batch between two measured points (batch, tokens/s)."""
    return float((b[1] / a[1]) ** (1 / math.log2(b[0] / a[0])))


def knee(curve: Curve, gain: float = KNEE_GAIN) -> int:
    """The smallest measured batch past which tokens/s grows by less than `gain` per doubling of the batch; the
    largest measured one if it never slows so. A dip (a slower larger batch) counts as a stop."""
    if not curve:
        raise ValueError("a knee needs at least one measured (batch tokens, tokens/s) point")
    for a, b in zip(curve, curve[1:], strict=False):
        if gain_per_doubling(a, b) < gain:
            return a[0]
    return curve[-1][0]


def _square_root_batch(inputs: BudgetInputs, tokens_per_second: float, smallest: int) -> tuple[int, float]:
    """(the square-root rule's batch, rounded and within [smallest, memory], the unrounded one)."""
    budget_tokens = tokens_per_second * inputs.devices * training_seconds(inputs)
    ideal = math.sqrt(BATCH_CONSTANT * budget_tokens) / (inputs.devices * inputs.grad_accum_steps)
    batch = int(round(ideal / BATCH_MULTIPLE)) * BATCH_MULTIPLE
    return max(smallest, min(batch, inputs.max_batch_tokens)), ideal


def _curve_words(curve: Curve) -> str:
    words = [f"{curve[0][0]:,} tokens: {curve[0][1]:,.0f}/s"]
    for a, b in zip(curve, curve[1:], strict=False):
        words.append(f"{b[0]:,}: {b[1]:,.0f}/s ({gain_per_doubling(a, b) - 1:+.0%} a doubling)")
    return ", ".join(words)


def choose_batch(inputs: BudgetInputs) -> tuple[int, int, str]:
    """(max_tokens_per_batch per device, expected updates, why)."""
    seconds = training_seconds(inputs)
    per_update = inputs.devices * inputs.grad_accum_steps  # batches of max_tokens_per_batch in one update
    smallest = min(max(MIN_BATCH_TOKENS, inputs.longest_example), inputs.max_batch_tokens)
    if inputs.throughput_at(smallest) <= 0:
        raise ValueError("tokens_per_second is needed to choose max_tokens_per_batch")
    # The square-root rule at the throughput of the batch it picks: on a curve that throughput grows with the
    # batch, and the fixed point is reached in a few rounds (the batch grows at most as the root of it).
    batch, ideal = _square_root_batch(inputs, inputs.throughput_at(smallest), smallest)
    for _ in range(8):
        again, ideal = _square_root_batch(inputs, inputs.throughput_at(batch), smallest)
        if again == batch:
            break
        batch = again
    square_root = batch
    knee_batch = None
    # A knee at the smallest measured batch says nothing of smaller ones: it does not raise the batch.
    if len(inputs.throughput_curve) > 1 and knee(inputs.throughput_curve) > inputs.throughput_curve[0][0]:
        knee_batch = max(smallest, min(knee(inputs.throughput_curve), inputs.max_batch_tokens))
        batch = max(batch, knee_batch)
    tokens_per_second = inputs.throughput_at(batch)
    budget_tokens = tokens_per_second * inputs.devices * seconds
    updates = max(1, int(budget_tokens / (batch * per_update)))
    rate = f"{tokens_per_second:,.0f} batch tokens/s " + (f"at {batch:,}" if inputs.throughput_curve else "measured")
    why = (
        f"{rate} x {inputs.devices} device(s) x "
        f"{seconds:,.0f} s of training = {budget_tokens / 1e6:,.2f}M batch tokens: {batch:,}-token batches give "
        f"about {updates:,} updates"
    )
    if len(inputs.throughput_curve) > 1:
        why = f"measured {_curve_words(inputs.throughput_curve)}; " + why
    if knee_batch is not None and knee_batch > square_root:
        why += (
            f" (the knee of the measured curve: past it tokens/s grows by less than {KNEE_GAIN - 1:.0%} a doubling; "
            f"the square-root rule's {square_root:,} would leave the device idle)"
        )
        if knee_batch < knee(inputs.throughput_curve):
            why += f"; capped at {knee_batch:,}, what fits in the worker's memory"
        return batch, updates, why
    why += " (batch and updates both grow as the square root of the budget"
    if knee_batch is not None:
        why += f"; the knee of the measured curve, {knee_batch:,}, is smaller"
    elif len(inputs.throughput_curve) > 1:
        why += f"; tokens/s grows by less than {KNEE_GAIN - 1:.0%} a doubling from the smallest batch measured"
    why += ")"
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
        chosen["vocab_size"], reasons["vocab_size"] = choose_vocabulary(inputs.training_pairs, inputs.languages)
    updates = None
    if "max_tokens_per_batch" in fields:
        batch, updates, reasons["max_tokens_per_batch"] = choose_batch(inputs)
        chosen["max_tokens_per_batch"] = batch
    elif "warmup_steps" in fields and inputs.throughput_at(fixed["max_tokens_per_batch"]) > 0:
        batch = fixed["max_tokens_per_batch"]
        tokens_per_second = inputs.throughput_at(batch)
        updates = max(1, int(tokens_per_second * training_seconds(inputs) / (batch * inputs.grad_accum_steps)))
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
