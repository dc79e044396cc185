"""Schemas of what a trained model is asked: translations, masked-token fills, attention, neighbours, geometry."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from app.schemas.common import Input, Language, Output

# What a request may ask for: auto leaves it to the service (SERVING_BACKEND, default auto: CTranslate2 where it
# serves the model, PyTorch otherwise); pytorch and ctranslate2 are that backend or a 503 naming it.
Backend = Literal["auto", "pytorch", "ctranslate2"]
# What answered. The two may differ slightly: CTranslate2's length penalty is len^alpha (ours GNMT's), int8 on a CPU
# and float16 on a GPU round differently; on `small` at beam 4, 97.7% of int8 outputs matched PyTorch's.
AnsweringBackend = Literal["pytorch", "ctranslate2"]
BACKEND_DESCRIPTION = (
    "auto (default): CTranslate2 where it serves the model (int8 on a CPU, float16 on a GPU; about 2.5x as fast "
    "on a CPU), else PyTorch; pytorch: our beam search, the reference; ctranslate2: the same weights converted "
    "(length penalty len^alpha). The answer says which backend answered"
)
# The beam of a request that names none, for a model whose owner set none (the model's `beam_size`).
DEFAULT_BEAM_SIZE = 4
BEAM_DESCRIPTION = "the beam's width (at most MAX_BEAM_SIZE; 1: greedy); default: the model's beam_size, else 4"


def beam_for(requested: int | None, model_default: int | None) -> int:
    """The beam a request decodes with: its own, else its model's, else DEFAULT_BEAM_SIZE."""
    if requested is not None:
        return requested
    return model_default if model_default is not None else DEFAULT_BEAM_SIZE


class MemoryRequest(Input):
    """A parallel dataset of the caller's used as a translation memory: its segments whose source is like a text's
    are returned beside the translation, and one scoring replace_at or more instead of it."""

    dataset_id: str = Field(min_length=1, max_length=100, description="a parallel dataset of the caller's")
    min_score: float = Field(
        75.0, ge=0, le=100, description="the lowest match score returned (0-100: rapidfuzz's ratio of the sources)"
    )
    max_matches: int = Field(3, ge=1, le=10, description="matches returned a text, at most")
    replace_at: float | None = Field(
        None,
        ge=0,
        le=100,
        description="a match scoring at least this is returned instead of the machine translation, which is then "
        "not made (100: exact matches only); null: never",
    )


class TranslateRequest(Input):
    texts: list[str] = Field(min_length=1)
    beam_size: int | None = Field(None, ge=1, description=BEAM_DESCRIPTION)
    max_length: int | None = Field(None, ge=1, le=16384, description="most target tokens; default 2 x source + 10")
    n_best: int = Field(1, ge=1)
    return_alignment: bool = False
    backend: Backend = Field("auto", description=BACKEND_DESCRIPTION)
    return_token_probs: bool = Field(
        False,
        description="also each translation's token probabilities (and </s>'s) and their geometric mean, "
        "`confidence`, as the backend that translated scores them",
    )
    memory: MemoryRequest | None = Field(None, description="a translation memory to look each text up in")
    glossary_id: str | None = Field(
        None,
        min_length=1,
        max_length=100,
        description="a glossary of the caller's: each of its source terms found in a text gets its target term in the "
        "translation",
    )
    target_language: Language | None = Field(
        None,
        description="the language to translate into: required for a model of several pairs (one of their targets); "
        "for a model of one pair, its own target or nothing",
    )
    source_language: Language | None = Field(
        None,
        description="the texts' language, for a model of several pairs: a pair it was never trained on is translated "
        "zero-shot and flagged (zero_shot)",
    )


class Alignment(Output):
    source_tokens: list[str]
    target_tokens: list[str]
    pairs: list[list[int]] = Field(
        description="[target index, source index]: the source token each target token attends to most"
    )


class Alternative(Output):
    text: str
    score: float


class TokenProb(Output):
    token: str
    prob: float = Field(description="its probability given the source and the tokens before it")


class MemoryMatch(Output):
    source: str = Field(description="the memory's source, whitespace collapsed")
    target: str
    score: float = Field(description="0-100: 100 for the same source (whitespace aside)")
    segment: int = Field(description="its row among the dataset's pairs")


class GlossaryTerm(Output):
    source: str = Field(description="the source term as the text has it")
    target: str
    how: Literal["present", "replaced", "inserted"] = Field(
        description="present: the model wrote it; replaced: it took the place of the words the model aligned with "
        "the source term; inserted: after the word aligned before it"
    )


class Translation(Output):
    text: str
    origin: Literal["machine", "memory"] = Field(
        "machine", description="memory: `text` is the best memory match, at or above memory.replace_at"
    )
    score: float | None = Field(
        description="log-probability divided by the length penalty (alpha 0.6); null for a translation from memory"
    )
    memory_matches: list[MemoryMatch] | None = Field(
        None, description="with memory: the memory's segments like this text, best first"
    )
    glossary_terms: list[GlossaryTerm] | None = Field(
        None, description="with glossary_id: the glossary's terms found in the text, in order, and what was done"
    )
    confidence: float | None = Field(
        None,
        description="the geometric mean of the probabilities of the translation's tokens and </s>, in (0, 1]: "
        "exp(log-probability / tokens), comparable across lengths and backends (with return_token_probs, that of "
        "token_probs)",
    )
    low_confidence: bool | None = Field(
        None,
        description="confidence is below the model's calibrated threshold (confidence_calibration on the model); "
        "null for a model without one",
    )
    token_probs: list[TokenProb] | None = Field(
        None, description="with return_token_probs: each target token's probability, then that of </s>"
    )
    alternatives: list[Alternative] | None = None
    alignment: Alignment | None = None
    split: bool = Field(
        False,
        description="true when the text was longer than the model's maximum length and "
        "was translated sentence by sentence",
    )
    pieces: int | None = None


class TranslateResponse(Output):
    translations: list[Translation]
    model_id: str
    backend: AnsweringBackend | Literal["memory"] = Field(
        description="the backend that translated these texts; memory when every one came from the memory"
    )
    elapsed_ms: float = Field(description="the request's time in the API, from its arrival to this answer")
    compute_ms: float = Field(description="the worker's time on it (with the texts decoded beside it)")
    beam_size: int = Field(description="the beam it decoded with: the request's, else the model's, else 4")
    target_language: str | None = Field(None, description="a model of several pairs: the language translated into")
    zero_shot: bool | None = Field(
        None,
        description="a model of several pairs, given source_language: true when it never trained on that pair",
    )


class FillMaskRequest(Input):
    text: str = Field(min_length=1, description="text with one or more <mask>")
    top_k: int = Field(5, ge=1)


class Candidate(Output):
    token: str
    score: float
    sequence: str


class MaskFill(Output):
    position: int = Field(description="which <mask>, counting from 0")
    char_offset: int
    candidates: list[Candidate]


class FillMaskResponse(Output):
    masks: list[MaskFill]
    model_id: str
    elapsed_ms: float = Field(description="the request's time in the API, from its arrival to this answer")
    compute_ms: float = Field(description="the worker's time on it")


class AttentionRequest(Input):
    text: str = Field(min_length=1)
    target: str | None = Field(None, description="default: the model's own greedy translation")


class AttentionResponse(Output):
    model_id: str
    source: str
    target: str
    source_tokens: list[str]
    target_tokens: list[str]
    encoder_self: list[Any] = Field(description="[layer][head][query][key]")
    decoder_self: list[Any]
    cross: list[Any] = Field(description="[layer][head][target position][source position]")


class Neighbor(Output):
    token: str
    id: int
    similarity: float


class NeighborsResponse(Output):
    model_id: str
    token: str
    neighbors: list[Neighbor]


class AttentionGeometry(Output):
    stack: Literal["encoder", "decoder"]
    layer: int
    attention: Literal["self_attn", "encoder_attn"]
    shares_storage_with_embedding: bool
    overlap_with_embedding: dict[str, float]  # q_proj, k_proj, v_proj, out_proj: RMS cosine of principal angles
    overlap_q_k: float


class GeometryResponse(Output):
    """See model/probes/geometry.py: how the trained projections relate to the embedding, from the model's weights."""

    model_id: str
    d_model: int
    k: int  # top singular directions compared
    random_baseline: float  # sqrt(k / d_model): the overlap of two random k-dimensional subspaces
    embedding_shape: list[int]
    projection_shape: list[int]
    embedding_tied_to_output: bool
    source_and_target_embeddings_shared: bool
    layers: list[AttentionGeometry]
    parameters: int = Field(description="values in the model's distinct parameter tensors (a tied matrix once)")
    trainable_parameters: int = Field(description="of those, the values of tensors with requires_grad set")
    embedding_trainable: bool = Field(description="whether the embedding matrix E has requires_grad set")
    parameter_bytes: int = Field(description="the parameters' bytes, as the worker loaded them")
