"""The settings a training job chooses, declared once: the API's request schema, the stored job and the trainer
all read these classes, so a field's name, type, bounds, default and description exist in one place.

- TrainSettings: how the model is trained (steps, batch, schedule, evaluation, checkpoints, ...).
- DataSettings: how the job's rows become training examples (prepare() in model/train/prepare.py).

Design: the fields are pydantic models, because the API validates requests with pydantic and its schema
(app/schemas/jobs.py `TrainingSpec`) is these two classes plus the fields that place a job on a worker; the
trainer's config (model/train/config.py `TrainConfig`) subclasses TrainSettings and adds what a job cannot set
(the device, Adam's constants, peak_lr, eval_max_sentences). Both are derived by inheritance, so there is
literally one list of fields and defaults, statically typed for mypy on both sides, and every rule (a bound, or
average_last <= keep_checkpoints) is checked once, where an instance is built: a request is refused with 422
naming the field, a trainer given a bad value raises pydantic's ValidationError (a ValueError) naming it.

The defaults are the product's (what a job gets when it leaves a field out); the paper's values, where they
differ, are in the descriptions. This module imports pydantic only (no torch), so the API can use it. A job
stored before a field existed lacks it and gets the default here.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationInfo, field_validator

from model.data.language_pairs import DEFAULT_TEMPERATURE

MAX_KEEP_CHECKPOINTS = 100
Precision = Literal["fp32", "bf16"]
TokenizerKind = Literal["bpe", "unigram", "byte_bpe"]
NoiseMode = Literal["span", "token"]


class Settings(BaseModel):
    """Unknown fields and values of another type than declared (`"8"` for an int, `0` for a bool) are refused."""

    model_config = ConfigDict(extra="forbid", strict=True)


class TrainSettings(Settings):
    """How a job trains; paper (Sec. 5.3, 5.4) where the description does not say otherwise."""

    max_steps: int = Field(2000, ge=1, le=10_000_000, description="optimizer updates (the paper trains base for 100k)")
    max_minutes: float | None = Field(
        None,
        gt=0,
        le=60 * 24 * 30,
        description="wall-clock budget for the training steps, summed over resumed attempts (null: none)",
    )
    max_tokens_per_batch: int = Field(
        4096,
        ge=32,
        le=4_000_000,
        description="padded tokens per micro-batch, built by token count with length bucketing (the paper: ~25k "
        "source + 25k target)",
    )
    grad_accum_steps: int = Field(
        1, ge=1, le=1024, description="micro-batches per update: the batch is max_tokens_per_batch x this"
    )
    precision: Precision | None = Field(
        None,
        description="bf16: mixed precision (bf16 autocast, fp32 weights and optimizer); fp32: none. "
        "Default (null): bf16 on a GPU worker, fp32 on a CPU worker",
    )
    compile: bool | None = Field(
        None,
        description="torch.compile each micro-batch's forward, loss and backward as one graph, a graph per bucket "
        "of padded lengths (data-parallel: each encoder and decoder layer); the first steps of each bucket are "
        "slower while it compiles; a compiler failure falls back to eager, logged. Default (null): the worker "
        "chooses, on for a GPU job whose training time wins back the compile time, off on a CPU "
        "(auto_settings.reasons.compile says why)",
    )
    log_every: int | None = Field(
        None,
        ge=1,
        le=1000,
        description="steps whose loss and gradient norm are read from the device together (every step is still "
        "recorded, once its interval is read). Default (null): 10 on a GPU worker, 1 on a CPU worker",
    )
    dynamics_every: int | None = Field(
        25,
        ge=1,
        le=1_000_000,
        description="updates between records of the per-component training dynamics (gradient, weight and update "
        "norms of every W_Q, W_K, W_V, W_O, W_1, W_2, LayerNorm and the embedding, per layer; "
        "GET /v1/jobs/{id}/dynamics), step 1 always included; null: none. 25 costs 0.03% of step time on 2 CPU "
        "cores; where a record takes over 3% of the time since the last, the worker doubles the spacing",
    )
    probe_tokens: list[Annotated[str, StringConstraints(min_length=1, max_length=50)]] | None = Field(
        None,
        max_length=20,
        description="tokens whose nearest neighbours in the embedding matrix are recorded at each checkpoint "
        "(GET /v1/jobs/{id}/embeddings); default (null): the most frequent words of the corpus",
    )
    warmup_steps: int = Field(
        400, ge=1, le=1_000_000, description="updates over which the rate rises to its peak (the paper: 4000)"
    )
    lr_scale: float | None = Field(
        None,
        gt=0,
        le=100,
        description="multiplies the paper's rate d_model^-0.5 * min(...). Default (null): sqrt(batch tokens an "
        "update / 3,072) below 3,072 tokens, else 1.0 (smaller batches, noisier gradients: a lower rate), or 0.25 "
        "for a job that starts from a model (init_model_id), whose trained weights the paper's peak rate would wreck",
    )
    label_smoothing: float = Field(0.1, ge=0, lt=1)
    clip_norm: float | None = Field(
        1.0,
        gt=0,
        allow_inf_nan=False,
        description="largest global gradient norm; null: no clipping (the norm is still recorded)",
    )
    seed: int = Field(1, ge=0, le=2**31 - 1, description="batches, dropout and the held-out validation split")
    eval_every: int = Field(
        200, ge=1, description="updates between evaluations; the last step is always evaluated (the paper: none)"
    )
    eval_every_minutes: float | None = Field(
        None,
        gt=0,
        le=60 * 24,
        description="also evaluate once this many minutes of training have passed since the last evaluation (a "
        "time-budgeted job evaluates at fractions of its time whatever its pace; a sweep's trials default to a "
        "ninth of max_minutes, so its pruner compares them early); null: every eval_every updates only",
    )
    eval_budget: float | None = Field(
        0.05,
        gt=0,
        le=1,
        description="most of the wall-clock time validation may "
        "take; an evaluation that would exceed it is skipped (null: every eval_every)",
    )
    checkpoint_every: int = Field(500, ge=1, description="updates between checkpoints")
    early_stopping_patience: int | None = Field(None, ge=1, description="evaluations without improvement")
    keep_checkpoints: int = Field(
        3, ge=1, le=MAX_KEEP_CHECKPOINTS, description="newest step checkpoints kept (plus the best)"
    )
    average_last: int = Field(1, ge=1, le=20, description="average the last N checkpoints into the model")
    best_metric: Literal["loss", "bleu", "chrf"] = Field(
        "loss",
        description="what picks the best checkpoint (the model, unless averaged) and counts for early stopping: the "
        "validation loss (lowest), or the BLEU or chrF of the validation translations (highest; translation jobs), "
        "as fairseq's --best-checkpoint-metric",
    )
    best_pair: Annotated[str, StringConstraints(max_length=40)] | None = Field(
        None,
        description="a job of several language pairs: the pair (such as 'en-nl') whose best_metric picks the best "
        "checkpoint and counts for early stopping; null: the mean over the pairs",
    )

    @field_validator("average_last")
    @classmethod
    def _averaged_checkpoints_are_kept(cls, average_last: int, info: ValidationInfo) -> int:
        keep = info.data.get("keep_checkpoints")  # absent when it failed its own check
        if keep is not None and average_last > keep:
            raise ValueError(f"average_last={average_last} needs keep_checkpoints >= {average_last}, got {keep}")
        return average_last


class DataSettings(Settings):
    """How a job's rows become examples: the tokenizer trained on them, the length limit, the validation split
    and, for denoising, the noise."""

    max_length: int = Field(128, ge=4, le=16384, description="longest sentence in tokens; longer ones are dropped")
    tokenizer: TokenizerKind = Field(
        "byte_bpe",
        description="subword model trained on the job's data: GPT-2 byte-level BPE (the default: it "
        "trained the better model in bench/quality.py) or SentencePiece-style BPE or unigram (byte fallback, no <unk>)",
    )
    normalization: Literal["nfkc", "nfc", "none"] = Field("nfkc", description="Unicode normalisation (bpe, unigram)")
    prefix_space: bool = Field(
        True,
        description="bpe, unigram: a sentence starts with the word mark, so its first "
        "word is the same token as elsewhere",
    )
    valid_fraction: float = Field(0.05, gt=0, lt=0.5, description="held out when no validation dataset is given")
    reverse: bool = Field(
        False,
        description="translation: learn target -> source from the datasets' pairs (a reverse model, as "
        "back-translation needs); the job's languages name the direction trained",
    )
    pair_temperature: float = Field(
        DEFAULT_TEMPERATURE,
        ge=1,
        le=100,
        description="a job of several language pairs: each pair's share of the rows follows its size to the power "
        "1/T (Arivazhagan et al., 2019): 1 samples by size, larger values give small pairs more",
    )
    noise: NoiseMode = Field(
        "span", description="denoising: a <mask> replaces a span (BART infilling) or exactly one token"
    )
    mask_ratio: float = Field(0.15, gt=0, lt=1, description="denoising: fraction of tokens masked")
