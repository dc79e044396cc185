"""A small student with fewer decoder layers, trained from fresh weights against cut from a trained model of the same
width (shrink and fine-tune: model/train/shrink.py), for the same minutes, in this process.

The data are the gettext catalogs' en-fr (bench/corpus.py). A `small` teacher (3 encoder and 3 decoder layers) trains
for --teacher-minutes; then each run of --runs trains a `small` model with one decoder layer for --minutes on the
original pairs, with the teacher's tokenizer:

- `fresh`: fresh weights (the preset's N(0, 0.02)), the paper's rate (lr_scale 1.0, warm-up 400);
- `keepN`: the teacher's embeddings, encoder and decoder layer N (`keep0`: the first, as kept_layers chooses),
  lr_scale 1.0 and warm-up 400, or as the run's options say (`keep0:lr_scale=0.25:warmup=100`: a job's default rate
  from a model).

Each model decodes the first 300 test sentences greedily. Prints one JSON line a model, then one JSON object last:
every run's greedy BLEU, updates and distinct outputs, and `ratio` = the best cut run's BLEU / the fresh run's.

    .venv/bin/python bench/shrink_students.py [--teacher-minutes 10] [--minutes 4]
        [--runs fresh,keep0,keep2,keep0:lr_scale=0.25:warmup=100]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import sacrebleu  # noqa: E402
import torch  # noqa: E402

from app.schemas.jobs import TrainingSpec  # noqa: E402
from bench.corpus import build  # noqa: E402
from model.data.corpus import read_parallel  # noqa: E402
from model.decode.queries import translate  # noqa: E402
from model.io.checkpoint import load_model  # noqa: E402
from model.train.config import TrainConfig  # noqa: E402
from model.train.events import TrainResult  # noqa: E402
from model.train.loop import train  # noqa: E402
from model.train.prepare import prepare  # noqa: E402
from model.train.shrink import shrunk_state  # noqa: E402

TEST_SENTENCES = 300


def spec(minutes: float, warmup: int = 400, lr_scale: float = 1.0) -> TrainingSpec:
    return TrainingSpec(
        max_steps=10_000_000, max_minutes=minutes, seed=1, max_tokens_per_batch=4000, warmup_steps=warmup,
        lr_scale=lr_scale,
    )  # fmt: skip


def scored(model: torch.nn.Module, tokenizer: Any, result: TrainResult, test: list[tuple[str, str]], run: str) -> dict:
    hyps = [r["text"] for r in translate(model, tokenizer, [s for s, _ in test], beam_size=1)]
    bleu = sacrebleu.corpus_bleu(hyps, [[t for _, t in test]]).score
    row = {"run": run, "steps": result.step, "bleu_greedy": round(bleu, 2), "distinct_outputs": len(set(hyps))}
    print(json.dumps({**row, "sample": hyps[:2]}), flush=True)
    return row


def options(run: str) -> tuple[str, dict[str, Any]]:
    """'keep0:lr_scale=0.25:warmup=100' -> ('keep0', {'lr_scale': 0.25, 'warmup': 100})."""
    name, *given = run.split(":")
    parsed: dict[str, Any] = {}
    for option in given:
        key, value = option.split("=")
        parsed[key] = float(value) if key == "lr_scale" else int(value)
    return name, parsed


def main() -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--teacher-minutes", type=float, default=10.0)
    p.add_argument("--minutes", type=float, default=4.0, help="each student's")
    p.add_argument("--runs", default="fresh,keep0,keep2,keep0:lr_scale=0.25:warmup=100")
    p.add_argument("--out", type=Path, default=ROOT / "var" / "corpus" / "en-fr")
    args = p.parse_args()
    build("fr", args.out, max_chars=200, valid_per_mille=20, test_per_mille=20)
    train_rows, valid_rows = read_parallel(args.out / "train.jsonl"), read_parallel(args.out / "valid.jsonl")
    test = list(read_parallel(args.out / "test.jsonl"))[:TEST_SENTENCES]
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="shrink-") as tmp:
        settings = spec(args.teacher_minutes)
        data = prepare(
            "translation", train_rows, valid_rows, preset="small", vocab_size=8000, settings=settings, seed=1
        )
        result = train(data, TrainConfig.from_settings(settings, precision="fp32"), Path(tmp) / "teacher")
        teacher, tokenizer, _ = load_model(result.model_checkpoint)
        rows.append(scored(teacher, tokenizer, result, test, "teacher"))
        for run in args.runs.split(","):
            name, given = options(run)
            settings = spec(args.minutes, **given)
            data = prepare(
                "translation", train_rows, valid_rows, preset="small", settings=settings, seed=1, tokenizer=tokenizer,
                model_overrides={"n_decoder_layers": 1},
            )  # fmt: skip
            if name.startswith("keep"):  # the teacher's layers: its encoder, and decoder layer N
                state = shrunk_state(teacher.state_dict(), teacher.config, teacher.config.n_encoder_layers, 1)
                kept = int(name[4:])
                for key, tensor in teacher.state_dict().items():
                    if key.startswith(f"decoder.layers.{kept}."):
                        state[key.replace(f"decoder.layers.{kept}.", "decoder.layers.0.", 1)] = tensor.clone()
                data = replace(data, init_state=state)
            result = train(data, TrainConfig.from_settings(settings, precision="fp32"), Path(tmp) / name, resume=False)
            model, _, _ = load_model(result.model_checkpoint)
            rows.append(scored(model, tokenizer, result, test, run))
    fresh = next(r["bleu_greedy"] for r in rows if r["run"] == "fresh")
    best = max((r["bleu_greedy"] for r in rows if r["run"].startswith("keep")), default=0.0)
    out = {"bench": "shrink_students", "teacher_minutes": args.teacher_minutes, "minutes": args.minutes,
           "decoder_layers": 1, "test_sentences": TEST_SENTENCES, "threads": torch.get_num_threads(),
           "runs": rows, "ratio": round(best / max(fresh, 1e-9), 2)}  # fmt: skip
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
