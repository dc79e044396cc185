"""Which preset a job trains when it leaves model.preset to the worker ("auto"), and the dropout that follows.

Pure and torch-free, like model/train/budget.py: the worker measures each candidate's throughput on its own device
(model/train/throughput.py), counts the corpus and what fits in memory, and passes the numbers in; the same numbers
always give the same choice.

The rule. NMT's cross-entropy falls as a power law in the non-embedding parameters N and in the training tokens D
(Gordon et al., 2021, "Data and Parameter Scaling Laws for NMT"; Ghorbani et al., 2021, "Scaling Laws for NMT",
find the encoder and decoder exponents differ, but the presets grow both alike, so one N serves). The law's form and
its fitting are Hoffmann et al.'s (2022, approach 3): L(N, D) = E + A / N^ALPHA + B / D^BETA, Huber on log L. Their
constants (HOFFMANN), fitted to language models of 70M-16B parameters, spread the N term over 4 nats between `tiny`
and `small` where our jobs showed about 1.5, and chose `small` where `tiny` won by 7.5-11.5 BLEU; LAW is the same fit
on our own jobs' validation curves (bench/size_law.py). With a time budget, each candidate's D is what the budget
affords it at its own measured throughput (its batch chosen by model/train/budget.py), so a larger model trades
tokens for parameters exactly as the device makes it pay.

Two corrections for small corpora, from Muennighoff et al. (2023, "Scaling Data-Constrained Language Models"):
- A token seen again is worth less: D' = U + U R* (1 - exp(-R / R*)), U the corpus's tokens, R the repeats (epochs
  less one), R* = REPEAT_DECAY. Up to about 4 epochs repeated data is nearly as good as new. Their R*, 15.4, fitted
  to language models, valued `tiny`'s 130 epochs of a 5k-pair cut at 16 new ones, where its validation loss stopped
  falling after 12 and rose after: R* is 10 here (below).
- Parameters beyond what the corpus supports are worth less: N' = U_N + U_N R_N* (1 - exp(-R_N / R_N*)), R_N = N /
  U_N - 1, U_N = PARAMETERS_PER_UNIQUE_TOKEN x U. Their U_N is the compute-optimal size for U (U / 20); at our sizes
  that makes every preset excess, against what this machine measured (below), so U_N is set from NMT practice.

Then the smallest preset whose predicted loss no larger one beats by PREFER_SMALLER. A job bounded by steps instead
of minutes fixes D, not the time: there the rule takes the largest preset those tokens train compute-optimally,
D' >= TOKENS_PER_PARAMETER x N (Hoffmann et al.'s 20 tokens a parameter), else the smallest.

Measured (bench/results/quality-*-service-presets-*.json), each preset alone on a 2-core CPU: on the en-fr corpus
on a slow day, `tiny` won at 10 minutes (28.96 BLEU against `small`'s 17.48) and at 20 (38.84 against 31.36); on
39.5k en-de pairs on a day 1.6 times faster, `small` won at 20 minutes (44.64 against 34.10). The fitted law picks
each winner; Hoffmann's constants picked `small` all three times, right once (tests/model/test_size_choice.py holds
these cases).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from model.train.budget import BudgetInputs, Curve, choose_batch, training_seconds

PRESET_FIELD = "preset"  # its name among a job's automatic settings (auto_settings.fields, chosen, reasons)
PRESET_ORDER = ("tiny", "small", "base", "big")  # ascending size: the order candidates are timed and compared in


@dataclass(frozen=True)
class LossLaw:
    """L(N, D) = irreducible + a / N^alpha + b / D^beta, nats a token (Hoffmann et al., 2022). The irreducible loss
    never changes a choice; it makes PREFER_SMALLER a share of the whole predicted loss."""

    irreducible: float
    a: float
    alpha: float
    b: float
    beta: float

    def loss(self, parameters: float, tokens: float) -> float:
        return float(self.irreducible + self.a / parameters**self.alpha + self.b / max(tokens, 1.0) ** self.beta)


# Hoffmann et al.'s approach-3 constants, fitted to language models of 70M-16B parameters.
HOFFMANN = LossLaw(irreducible=1.69, a=406.4, alpha=0.34, b=410.7, beta=0.28)
# The same law and fit on our jobs' validation curves (bench/size_law.py; bench/results/size_law-*.json): tiny and
# small on the en-fr corpus, 10 and 20 minutes on a 2-core CPU, 39 points. alpha stays Hoffmann's (two sizes measure
# A / N^alpha at two points only); the irreducible loss went to its bound, 0, as curves this far from convergence
# leave it free. Refitted with REPEAT_DECAY at 10 (size_law-cpu-2026-11-28-tiny-small-10-20min-r10.json).
LAW = LossLaw(irreducible=0.0, a=59.6156, alpha=0.34, b=2158.5333, beta=0.4971)
# Muennighoff et al. (2023): the repeats (R*) and excess parameters (R_N*) at which their value has decayed by 1/e.
REPEAT_DECAY, EXCESS_DECAY = 10.0, 5.3
# Parameters a unique corpus token supports before more are worth less. fairseq's IWSLT'14 de-en recipe trains
# 31.5M non-embedding parameters on about 4M tokens (8 a token) with dropout 0.3; at 4, `small` (5.5M) on 39.5k
# pairs (556k tokens) keeps nine tenths of its worth, which the 10 BLEU it won over `tiny` there asks for.
PARAMETERS_PER_UNIQUE_TOKEN = 4.0
# A larger preset must predict a loss this much lower (a share) than the smaller one chosen so far: the fit is not
# that precise so far from the sizes it was made at, and a larger model costs more to train and to serve.
PREFER_SMALLER = 0.01
TOKENS_PER_PARAMETER = 20.0  # a job bounded by steps: Hoffmann et al.'s compute-optimal tokens a parameter

# Timing the candidates. A larger preset is timed only if, at THROUGHPUT_HEADROOM times the tokens/s the compute
# ratio predicts from the last one timed, it could still win, and its timed steps would take at most PROBE_SHARE of
# the budget. On this CPU `small` ran 6.5 times slower than `tiny` for 13.4 times the compute per token, and `base`
# 2.6 times slower than `small` for 7.1 times: at most 2.7 times better than the ratio.
THROUGHPUT_HEADROOM = 4.0
PROBE_SHARE = 0.05

# Dropout follows the epochs of a model that can memorise its corpus, with more parameters than it has tokens: the
# preset's own up to RISE_FROM_EPOCHS (1 + R*, where a repeat is worth a third of a new token), rising with the log
# of the epochs to HIGH_DROPOUT at HIGH_AT_EPOCHS (1 + 10 R*). 0.3 is the paper's P_drop for `big` on EN-DE and
# fairseq's for the IWSLT'14 recipe, whose label smoothing stays the paper's 0.1 (so the rule leaves label smoothing
# as it is). Measured on the 2-core CPU, en-fr (bench/results/quality-10min-service-5k-pairs-*.json): `tiny` (0.23M
# parameters, dropout 0.0) went on improving for 18 epochs of the corpus (774k tokens) and overfitted after 12 of a
# 5k-pair cut (83k); `small` (5.5M) at its 0.1 was still improving after 15 epochs of the cut, and at 0.3 over 18
# reached a validation loss of 3.77 against 2.65 (2.52 BLEU against 21.73): within a budget, dropout the run does
# not need costs more than the overfitting it prevents. (The rule before rose from 4 epochs to 0.3 at 16.4.)
RISE_FROM_EPOCHS, HIGH_AT_EPOCHS = 1.0 + REPEAT_DECAY, 1.0 + 10 * REPEAT_DECAY
HIGH_DROPOUT = 0.3


@dataclass(frozen=True)
class Candidate:
    """A preset as this worker would train it: its size, its memory, its measured (or estimated) throughput."""

    preset: str
    parameters: int  # non-embedding parameters: N of the law (Gordon et al. count these)
    compute_parameters: int  # what each token's step multiplies through: N plus the output projection (V x d_model)
    memory_bytes: int  # estimated training memory at the smallest batch the job would use
    max_batch_tokens: int  # the largest batch that fits in the device's memory; 0: none does
    tokens_per_second: float = 0.0  # batch tokens/s per device (at the curve's first point); 0: not timed
    throughput_curve: Curve = ()
    throughput: str = "measured"  # measured | estimated (from another's, by the compute ratio) | not timed
    note: str = ""  # why it was not timed, or what its estimate came from

    def __post_init__(self) -> None:
        object.__setattr__(self, "throughput_curve", tuple((int(b), float(t)) for b, t in self.throughput_curve))


@dataclass(frozen=True)
class SizeInputs:
    """What the choice depends on; recorded with it so that it can be checked and reproduced."""

    candidates: tuple[Candidate, ...]
    corpus_tokens: int  # batch tokens of one epoch of the training data (each example's longer side + 1)
    training_pairs: int
    max_minutes: float | None  # None: the job is bounded by its steps
    memory_limit_bytes: int
    probe_seconds: float = 0.0  # spent timing the candidates: taken off the budget
    longest_example: int = 0
    devices: int = 1
    grad_accum_steps: int = 1
    eval_budget: float | None = 0.05
    max_tokens_per_batch: int | None = None  # the job's batch when it gives one (always, when steps bound)
    max_steps: int | None = None  # the steps that bound a job without max_minutes

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "candidates", tuple(c if isinstance(c, Candidate) else Candidate(**c) for c in self.candidates)
        )
        if not self.candidates:
            raise ValueError("no candidate preset to choose from")
        if self.corpus_tokens <= 0:
            raise ValueError(f"corpus_tokens={self.corpus_tokens} must be positive")
        if self.max_minutes is None and (self.max_steps is None or self.max_tokens_per_batch is None):
            raise ValueError("a job without max_minutes is bounded by max_steps of max_tokens_per_batch: give both")

    def budget(self, candidate: Candidate) -> BudgetInputs:
        """The time budget's inputs for one candidate, less the seconds spent timing them all."""
        assert self.max_minutes is not None
        curve = candidate.throughput_curve
        return BudgetInputs(
            max_minutes=max(self.max_minutes - self.probe_seconds / 60, self.max_minutes / 100),
            training_pairs=self.training_pairs,
            longest_example=self.longest_example,
            tokens_per_second=candidate.tokens_per_second,
            devices=self.devices,
            grad_accum_steps=self.grad_accum_steps,
            eval_budget=self.eval_budget,
            max_batch_tokens=max(candidate.max_batch_tokens, 1),
            throughput_curve=curve if len(curve) > 1 else (),
        )


@dataclass(frozen=True)
class Prediction:
    preset: str
    tokens: float  # batch tokens it trains on within the budget
    epochs: float
    effective_tokens: float  # D': repeats discounted
    effective_parameters: float  # N': parameters beyond the corpus's support discounted
    loss: float  # predicted cross-entropy, nats a token
    batch: int | None = None  # the budget's batch for it


@dataclass(frozen=True)
class SizeChoice:
    preset: str
    reason: str
    epochs: float
    predictions: list[Prediction] = field(default_factory=list)
    inputs: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def effective_tokens(tokens: float, corpus_tokens: int) -> float:
    """D' of Muennighoff et al.: the first epoch counts whole, each repeat less, to at most U (1 + R*)."""
    if tokens <= corpus_tokens:
        return tokens
    repeats = tokens / corpus_tokens - 1
    return corpus_tokens * (1 + REPEAT_DECAY * (1 - math.exp(-repeats / REPEAT_DECAY)))


def supported_parameters(corpus_tokens: int) -> float:
    """U_N: the parameters a corpus of corpus_tokens supports before more are worth less."""
    return PARAMETERS_PER_UNIQUE_TOKEN * corpus_tokens


def effective_parameters(parameters: int, corpus_tokens: int) -> float:
    """N' of Muennighoff et al.: parameters past U_N count less, to at most U_N (1 + R_N*)."""
    supported = supported_parameters(corpus_tokens)
    if parameters <= supported:
        return float(parameters)
    excess = parameters / supported - 1
    return supported * (1 + EXCESS_DECAY * (1 - math.exp(-excess / EXCESS_DECAY)))


def predicted_loss(parameters: float, tokens: float) -> float:
    return LAW.loss(parameters, tokens)


def tokens_within(inputs: SizeInputs, candidate: Candidate) -> tuple[float, int]:
    """(batch tokens the candidate trains on, its batch): within the time budget at its throughput, at the budget
    rule's batch or the job's; or, bounded by steps, the steps' tokens."""
    per_update = inputs.devices * inputs.grad_accum_steps
    if inputs.max_minutes is None:
        assert inputs.max_steps is not None and inputs.max_tokens_per_batch is not None
        return float(inputs.max_steps * inputs.max_tokens_per_batch * per_update), inputs.max_tokens_per_batch
    budget = inputs.budget(candidate)
    if inputs.max_tokens_per_batch is None:
        batch, updates, _ = choose_batch(budget)
        return float(updates * batch * per_update), batch
    batch = inputs.max_tokens_per_batch
    updates = max(1, int(budget.throughput_at(batch) * training_seconds(budget) / (batch * inputs.grad_accum_steps)))
    return float(updates * batch * per_update), batch


def predict(inputs: SizeInputs, candidate: Candidate) -> Prediction:
    tokens, batch = tokens_within(inputs, candidate)
    d_eff = effective_tokens(tokens, inputs.corpus_tokens)
    n_eff = effective_parameters(candidate.parameters, inputs.corpus_tokens)
    return Prediction(
        candidate.preset,
        round(tokens),
        round(tokens / inputs.corpus_tokens, 2),
        round(d_eff),
        round(n_eff),
        round(predicted_loss(n_eff, d_eff), 4),
        batch,
    )


def estimated(timed: Candidate, other: Candidate, factor: float = 1.0) -> Candidate:
    """`other` at the throughput (the curve, where there is one) of a timed candidate times the ratio of the compute
    each token costs them, times `factor`."""
    ratio = factor * timed.compute_parameters / other.compute_parameters
    return replace(
        other,
        tokens_per_second=timed.tokens_per_second * ratio,
        throughput_curve=tuple((b, t * ratio) for b, t in timed.throughput_curve),
        throughput="estimated",
        note=f"{timed.preset}'s tokens/s times the compute ratio{f' times {factor:g}' if factor != 1 else ''}",
    )


def worth_timing(
    inputs: SizeInputs, best: Prediction, timed: Candidate, candidate: Candidate, probe_batches: list[int]
) -> tuple[bool, str]:
    """Whether to time `candidate` after `timed` (the last one timed; `best` the best prediction so far), stepping
    a batch of each size in probe_batches: it could win at THROUGHPUT_HEADROOM times the tokens/s the compute ratio
    predicts, and its steps would take at most PROBE_SHARE of the budget at those tokens/s. (False, why) if not."""
    guess = estimated(timed, candidate)
    rate = guess.tokens_per_second
    if inputs.max_minutes is not None:
        rates = inputs.budget(guess)
        seconds = sum(b / rates.throughput_at(b) for b in probe_batches)
        if seconds > PROBE_SHARE * inputs.max_minutes * 60:
            return False, (
                f"not timed: its steps would take ~{seconds:,.0f} s at the tokens/s {timed.preset}'s suggest "
                f"(~{rate:,.0f} at {probe_batches[0]:,}), over {PROBE_SHARE:.0%} of the budget"
            )
    hope = predict(inputs, estimated(timed, candidate, THROUGHPUT_HEADROOM))
    if hope.loss >= best.loss * (1 - PREFER_SMALLER):
        return False, (
            f"not timed: even at {THROUGHPUT_HEADROOM:g}x the ~{rate:,.0f} tokens/s {timed.preset}'s suggest it "
            f"would predict {hope.loss:.2f}, not below {best.preset}'s {best.loss:.2f}"
        )
    return True, ""


def _tokens(n: float) -> str:
    return f"{n / 1e6:,.2f}M" if n >= 1e6 else f"{n / 1e3:,.0f}k"


def _gb(n: float) -> str:
    return f"{n / 1024**3:.1f} GB"


def _by_steps(inputs: SizeInputs, candidates: list[Candidate]) -> tuple[Prediction, list[Prediction], str]:
    """Bounded by steps: the largest candidate its tokens train compute-optimally, else the smallest."""
    predictions = [predict(inputs, c) for c in candidates]
    within = [
        p
        for p, c in zip(predictions, candidates, strict=True)
        if p.effective_tokens >= TOKENS_PER_PARAMETER * c.parameters
    ]
    best = within[-1] if within else predictions[0]
    seen = f"{_tokens(best.tokens)} batch tokens ({best.epochs:g} epochs of {_tokens(inputs.corpus_tokens)})"
    if within:
        why = f"the largest preset they train compute-optimally, {TOKENS_PER_PARAMETER:g} tokens a parameter or more"
    else:
        why = f"fewer than {TOKENS_PER_PARAMETER:g} tokens a parameter for every preset: the smallest"
    return best, predictions, f"{best.preset}: bounded by steps, it trains on {seen}; {why} (Hoffmann et al.)"


def prefer_smaller(losses: list[float]) -> int:
    """The index of the choice among predicted losses in ascending size: the lowest, a larger one only if lower than
    the one chosen so far by PREFER_SMALLER."""
    best = 0
    for i in range(1, len(losses)):
        if losses[i] < losses[best] * (1 - PREFER_SMALLER):
            best = i
    return best


def _by_time(inputs: SizeInputs, candidates: list[Candidate]) -> tuple[Prediction, list[Prediction], str]:
    """Within the time budget: the lowest predicted loss, a larger preset only if lower by PREFER_SMALLER."""
    predictions = [predict(inputs, c) for c in candidates]
    best = predictions[prefer_smaller([p.loss for p in predictions])]
    chosen = candidates[predictions.index(best)]
    seconds = training_seconds(inputs.budget(chosen))
    others = ", ".join(f"{p.preset} {p.loss:.2f}" for p in predictions if p is not best)
    return (
        best,
        predictions,
        (
            f"{best.preset}: predicted loss {best.loss:.2f}{f' against {others}' if others else ''} (Hoffmann et al.'s "
            f"L(N, D), repeats and parameters past {_tokens(supported_parameters(inputs.corpus_tokens))} discounted as "
            f"in Muennighoff et al.); {_tokens(best.tokens)} batch tokens in {seconds / 60:.1f} min of training at "
            f"{chosen.tokens_per_second:,.0f} tokens/s ({chosen.throughput}), {best.epochs:g} epochs of "
            f"{_tokens(inputs.corpus_tokens)}"
        ),
    )


def choose_size(inputs: SizeInputs) -> SizeChoice:
    """The preset to train, why, and the epochs it would see (the rule: this module's docstring). ValueError when
    no candidate fits the device's memory."""
    fitting = [c for c in inputs.candidates if c.max_batch_tokens > 0]
    if not fitting:
        smallest = min(inputs.candidates, key=lambda c: c.memory_bytes)
        raise ValueError(
            f"no preset fits this device's memory: the smallest, {smallest.preset}, needs {_gb(smallest.memory_bytes)} "
            f"to train and the device has {_gb(inputs.memory_limit_bytes)}"
        )
    if inputs.max_minutes is None:
        timed, (best, predictions, reason) = fitting, _by_steps(inputs, fitting)
    else:
        timed = [c for c in fitting if c.tokens_per_second > 0]
        if not timed:
            raise ValueError("no candidate preset was timed: a time budget needs the tokens/s of at least one")
        best, predictions, reason = _by_time(inputs, timed)
    notes = [f"{c.preset} {c.note}" for c in fitting if c not in timed and c.note]
    notes += [
        f"{c.preset} does not fit ({_gb(c.memory_bytes)} of {_gb(inputs.memory_limit_bytes)})"
        for c in inputs.candidates
        if c.max_batch_tokens == 0
    ]
    return SizeChoice(best.preset, "; ".join([reason, *notes]), best.epochs, predictions, asdict(inputs))


def choose_dropout(preset_dropout: float, parameters: int, corpus_tokens: int, epochs: float) -> tuple[float, str]:
    """P_drop for the chosen preset: its own, raised toward HIGH_DROPOUT with the log of the epochs past
    RISE_FROM_EPOCHS when it has more parameters than the corpus has tokens (rounded to 0.01; never lowered)."""
    size = f"{parameters / 1e6:.2f}M parameters"
    if parameters <= corpus_tokens:
        return preset_dropout, (
            f"the preset's {preset_dropout:g}: {size}, no more than its corpus's {_tokens(corpus_tokens)} tokens"
        )
    if epochs <= RISE_FROM_EPOCHS:
        return preset_dropout, f"the preset's {preset_dropout:g}: {epochs:g} epochs, no more than {RISE_FROM_EPOCHS:g}"
    share = min(1.0, math.log(epochs / RISE_FROM_EPOCHS) / math.log(HIGH_AT_EPOCHS / RISE_FROM_EPOCHS))
    dropout = round(max(preset_dropout, preset_dropout + (HIGH_DROPOUT - preset_dropout) * share), 2)
    return dropout, (
        f"{dropout:g}: {epochs:g} epochs of a {_tokens(corpus_tokens)}-token corpus its {size} can memorise; from "
        f"the preset's {preset_dropout:g} toward {HIGH_DROPOUT:g} at {HIGH_AT_EPOCHS:g} epochs"
    )
