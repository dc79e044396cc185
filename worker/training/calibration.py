"""At the end of a translation job: the low-confidence threshold of the model it publishes, calibrated on the job's
validation pairs (model/decode/calibration.py), stored with the model (models.confidence_calibration).

The model to publish is translated by beam search on the training device, as PyTorch serves it; CTranslate2's
int8 confidences differ from these by a few thousandths (tests/e2e/test_inference_api.py), which the flag ignores.
A failure here (out of memory on a device the training just filled, say) costs the model its flag, never the job:
it is logged and the model is published without one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from model.data.batching import Example
from model.data.tokenizer import Tokenizer
from model.decode.calibration import calibrate_model
from model.io.checkpoint import load_checkpoint, model_from_checkpoint
from model.train.prepare import PreparedData

log = logging.getLogger(__name__)
CALIBRATION_SENTENCES = 200  # validation pairs translated at most: 3.2 s for an untrained `small` on two CPU cores
# (every translation at its maximum length), 0.6 s for `tiny`


def held_out(data: PreparedData) -> list[Example]:
    """The validation pairs a translation job calibrates on (none for a denoising job)."""
    return list(data.valid_examples[:CALIBRATION_SENTENCES]) if data.objective == "translation" else []


def calibrate_checkpoint(
    job_id: str, checkpoint: str, examples: Sequence[Example], tokenizer: Tokenizer, device: str
) -> dict[str, Any] | None:
    """The calibration of the checkpoint's model on `examples` (as JSON), or None: too few of them (fewer than
    model.decode.calibration.MIN_SENTENCES after dropping sources past the model's length), or a failure (logged)."""
    if not examples:
        return None
    started = time.perf_counter()
    try:
        model = model_from_checkpoint(load_checkpoint(checkpoint, with_optimizer=False), device).eval()
        limit = model.config.max_positions - 1  # room for </s>
        sources = tokenizer.decode_batch([list(e.src_ids) for e in examples])
        references = tokenizer.decode_batch([list(e.tgt_ids) for e in examples])
        fits = [len(ids) <= limit for ids in tokenizer.encode_batch(sources)]  # as a request would send them
        pairs = [(s, t) for s, t, ok in zip(sources, references, fits) if ok]
        found = calibrate_model(model, tokenizer, [s for s, _ in pairs], [t for _, t in pairs])
    except Exception:
        log.exception("job %s: the low-confidence flag could not be calibrated; the model is published without", job_id)
        return None
    if found is None:
        log.info("job %s: %d validation pairs are too few to calibrate a low-confidence flag", job_id, len(pairs))
        return None
    log.info(
        "job %s: confidence below %.3f flags %.0f%% of %d validation sentences (chrF %s against %.1f); %.1f s",
        job_id, found.threshold, 100 * found.flagged_share, found.sentences,
        "-" if found.flagged_chrf is None else f"{found.flagged_chrf:.1f}", found.other_chrf,
        time.perf_counter() - started,
    )  # fmt: skip
    return found.to_dict()
