"""Translation quality after the same wall-clock minutes: our training against a plain `transformers` loop.

    python bench/quality.py --minutes 20 --seeds 0 1 2 --recipe peer [--through service]

The corpus is real (bench/corpus.py: English -> French messages from the gettext catalogs under
/usr/share/locale, split by a hash of the source). Each seed trains both sides for --minutes on the training
part and scores them on the test part with sacrebleu (BLEU and chrF on detokenized text, beam 4):

  ours   a `small` job (d_model 256, 4 heads, 3+3 layers, d_ff 1024), the job defaults of the API
         (app.schemas.jobs.TrainingSpec) unless the recipe or --set says otherwise, its own tokenizer.
         --through function: prepare() + train() in this process, as the worker calls them.
         --through service: a real job on the service's embedded default (`python -m app.cli serve`:
         SQLite, local broker, a training and an inference worker), decoded over HTTP by /translate.
  peer   Hugging Face MarianMTModel of the same size from scratch in a minimal loop (bench/quality_peer.py):
         BPE with a Metaspace pre-tokenizer and NFC (vocabulary of the same size), batches of shuffled pairs
         with batch size x longest side <= the same token limit, Adam (0.9, 0.98, 1e-9), the paper's rate with
         the same warm-up, label smoothing 0.1, clipping at 1.0, MarianConfig's other defaults; decoded by
         generate(num_beams=4).

Recipes: `peer` gives both sides vocabulary 4000, 1500-token batches and warm-up 400; `ours` gives both our
job defaults (vocabulary, batch tokens and warm-up of TrainingSpec); `auto` gives ours only the budget
(`max_minutes`; the worker chooses vocabulary, batch, warm-up, model/train/budget.py) and the peer its recipe.
--concurrent trains both sides at once on half the threads each (a 60-minute pair in an hour, one machine load).
--train-pairs N trains on a sample of N training pairs (the small-corpus regime), validated and tested as the rest.
Prints a line per run, then one JSON object as the last line with medians over seeds and
`ratio` = our median BLEU / the peer's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import sacrebleu
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.schemas.jobs import ModelSpec, TrainingSpec  # noqa: E402
from bench.corpus import build as build_corpus  # noqa: E402
from bench.corpus import cut as cut_corpus  # noqa: E402
from bench.quality_peer import peer  # noqa: E402

PRESET = "small"
RECIPES: dict[str, dict[str, Any]] = {
    "peer": {"vocab_size": 4000, "max_tokens_per_batch": 1500, "warmup_steps": 400},
    "ours": {
        "vocab_size": ModelSpec().vocab_size,
        "max_tokens_per_batch": TrainingSpec().max_tokens_per_batch,
        "warmup_steps": TrainingSpec().warmup_steps,
    },
    # Ours leaves vocabulary, batch, warm-up and step limit to the budget (model/train/budget.py); the peer keeps its
    # best recipe (that of "peer").
    "auto": {"vocab_size": 4000, "max_tokens_per_batch": 1500, "warmup_steps": 400, "ours_from_budget": True},
}


def read_jsonl(path: Path) -> list[tuple[str, str]]:
    with open(path, encoding="utf-8") as f:
        return [(row["source"], row["target"]) for row in map(json.loads, f)]


def score(hyps: Sequence[str], refs: Sequence[str]) -> dict[str, float]:
    return {
        "bleu": round(sacrebleu.corpus_bleu(list(hyps), [list(refs)]).score, 2),
        "chrf": round(sacrebleu.corpus_chrf(list(hyps), [list(refs)]).score, 2),
    }


def curves(series: dict[str, dict[str, list[Any]]]) -> dict[str, list[list[Any]]]:
    """A job's validation curves ([step, value] pairs) from its /metrics series, under names apart from score()'s:
    valid_bleu is greedy, on the validation sentences the job decodes (the job's series "bleu")."""
    return {
        key: [list(p) for p in zip(*(series.get(name, {}).get(k, []) for k in ("steps", "values")))]
        for key, name in (("valid_loss", "valid_loss"), ("valid_bleu", "bleu"))
    }


def flag_on_test(
    found: Sequence[dict[str, Any]], refs: Sequence[str], calibration: dict[str, Any] | None
) -> dict[str, Any]:
    """The low-confidence flag calibrated on the validation pairs, as it splits the test set (as an evaluation
    reports it: model/decode/calibration.confidence_split): the share flagged, the mean sentence chrF of the flagged
    and the others, and the rank correlation of confidence with chrF."""
    from model.decode.calibration import confidence_split

    split = confidence_split([t["text"] for t in found], list(refs), [t["confidence"] for t in found], calibration)
    split = split or {}
    return {
        "calibration": calibration,
        "test_flagged_share": split.get("flagged_share"),
        "test_flagged_chrf": split.get("flagged_chrf"),
        "test_other_chrf": split.get("other_chrf"),
        "test_spearman": split.get("spearman"),
    }


# -- ours, in this process ------------------------------------------------------------------------------------


def ours_function(
    corpus: Path,
    test: list[tuple[str, str]],
    recipe: dict[str, Any],
    seed: int,
    minutes: float,
    overrides: dict[str, Any],
) -> dict[str, Any]:
    if recipe.get("ours_from_budget"):
        raise SystemExit("--recipe auto: the settings are chosen by the worker; run it with --through service")
    from model.data.corpus import read_parallel
    from model.decode.queries import translate
    from model.io.checkpoint import load_model
    from model.train.config import TrainConfig
    from model.train.loop import train
    from model.train.prepare import prepare

    settings: dict[str, Any] = {
        "max_steps": 10_000_000,
        "max_minutes": minutes,
        "seed": seed,
        "max_tokens_per_batch": recipe["max_tokens_per_batch"],
        "warmup_steps": recipe["warmup_steps"],
    }
    settings |= {k.split(".", 1)[1]: v for k, v in overrides.items() if k.startswith("training.")}  # --set wins
    spec = TrainingSpec(**settings)
    model_overrides = {k.split(".", 1)[1]: v for k, v in overrides.items() if k.startswith("model.")}
    t0 = time.monotonic()
    data = prepare(
        "translation",
        read_parallel(corpus / "train.jsonl"),
        read_parallel(corpus / "valid.jsonl"),
        preset=PRESET,
        model_overrides=model_overrides,
        vocab_size=recipe["vocab_size"],
        settings=spec,
        seed=seed,
    )
    prepare_s = time.monotonic() - t0
    with tempfile.TemporaryDirectory(prefix="quality-") as tmp:
        config = TrainConfig.from_settings(spec, precision="fp32")
        result = train(data, config, Path(tmp) / "ckpt")
        model, tokenizer, _ = load_model(result.model_checkpoint)
    t0 = time.monotonic()
    hyps = [r["text"] for r in translate(model, tokenizer, [s for s, _ in test], beam_size=4)]
    sources = tokenizer.encode_batch([s for s, _ in test])
    return {
        **score(hyps, [t for _, t in test]),
        "steps": result.step,
        "train_seconds": round(result.elapsed, 1),
        "eval_seconds": result.metrics.get("eval_seconds"),
        "prepare_seconds": round(prepare_s, 1),
        "decode_seconds": round(time.monotonic() - t0, 1),
        "source_pieces_per_sentence": round(statistics.mean(map(len, sources)), 2),
        "stop": result.stop_reason,
    }


# -- ours, as a real job --------------------------------------------------------------------------------------


def ours_service(
    corpus: Path,
    test: list[tuple[str, str]],
    recipe: dict[str, Any],
    seed: int,
    minutes: float,
    overrides: dict[str, Any],
) -> dict[str, Any]:
    from bench.harness.stack import wait_for
    from bench.service_session import embedded_service, translations, upload

    with embedded_service("quality-service-") as client:
        if recipe.get("ours_from_budget"):  # only the budget: the worker chooses the rest
            training, model = {"max_minutes": minutes, "seed": seed}, {"preset": PRESET}
        else:
            training = {
                "max_steps": 10_000_000,
                "max_minutes": minutes,
                "seed": seed,
                "max_tokens_per_batch": recipe["max_tokens_per_batch"],
                "warmup_steps": recipe["warmup_steps"],
            }
            model = {"preset": PRESET, "vocab_size": recipe["vocab_size"]}
        for name, value in overrides.items():
            section, field = name.split(".", 1)
            (training if section == "training" else model)[field] = value
        r = client.post(
            "/v1/jobs",
            json={
                "objective": "translation",
                "dataset_id": upload(client, corpus / "train.jsonl", "train"),
                "valid_dataset_id": upload(client, corpus / "valid.jsonl", "valid"),
                "model": model,
                "training": training,
            },
        )
        r.raise_for_status()
        job_id = r.json()["id"]
        job = wait_for(
            lambda: (
                (j := client.get(f"/v1/jobs/{job_id}").json())["status"] in ("succeeded", "failed", "cancelled") and j
            ),
            minutes * 60 + 900,
            "the job",
            interval=5,
        )
        if job["status"] != "succeeded":
            raise RuntimeError(f"job {job_id} {job['status']}: {job.get('error')}")
        model_id = job["model_id"]
        series = client.get(f"/v1/jobs/{job_id}/metrics", params={"names": "eval_seconds,valid_loss,bleu"}).json()[
            "series"
        ]
        t0 = time.monotonic()
        found = translations(client, model_id, [source for source, _ in test])
        hyps = [t["text"] for t in found]
        eval_seconds = series.get("eval_seconds", {}).get("values", [])
        calibration = client.get(f"/v1/models/{model_id}").json().get("confidence_calibration")
        return {
            **score(hyps, [t for _, t in test]),
            "confidence": flag_on_test(found, [t for _, t in test], calibration),
            "steps": job["progress"]["step"],
            "tokens_seen": job["progress"].get("tokens_seen"),  # batch tokens over all steps: D of a scaling law
            **curves(series),
            "eval_seconds": round(max(eval_seconds), 1) if eval_seconds else None,
            "decode_seconds": round(time.monotonic() - t0, 1),
            "job": job_id,
            **(
                {
                    "auto_settings": {
                        k: job["auto_settings"][k]
                        for k in ("chosen", "expected_updates", "throughput", "probe_seconds")
                    }
                    | {"tokens_per_second": job["auto_settings"]["inputs"]["tokens_per_second"]}
                }
                if job.get("auto_settings")
                else {}
            ),
        }


# -- the peer (bench/quality_peer.py) ------------------------------------------------------------------------


def peer_run(
    corpus: Path,
    test: list[tuple[str, str]],
    recipe: dict[str, Any],
    seed: int,
    minutes: float,
    config_overrides: dict[str, Any],
) -> dict[str, Any]:
    rows = read_jsonl(corpus / "train.jsonl")
    hyps, info = peer(rows, [s for s, _ in test], recipe, seed, minutes, config_overrides=config_overrides)
    return {**score(hyps, [t for _, t in test]), **info}


# -- the comparison -------------------------------------------------------------------------------------------


def on_threads(n: int, run: Callable[[], dict[str, Any]]) -> Callable[[], dict[str, Any]]:
    """`run` on n torch threads, set in the thread that runs it (a side's own thread with --concurrent). Ours
    passes the count on to the service's processes."""

    def in_thread() -> dict[str, Any]:
        torch.set_num_threads(n)
        return run()

    return in_thread


def run_sides(sides: dict[str, Callable[[], dict[str, Any]]], concurrent: bool) -> Iterator[tuple[str, dict[str, Any]]]:
    """Run each side's training and scoring, one after the other or all at once (threads: ours is then a job
    in the service's processes, the peer trains here), yielding (side, result) in the order given."""
    if not concurrent:
        for side, run in sides.items():
            yield side, run()
        return
    with ThreadPoolExecutor(max_workers=len(sides), thread_name_prefix="side") as pool:
        futures = {side: pool.submit(run) for side, run in sides.items()}
        for side, future in futures.items():
            yield side, future.result()


def parse_settings(items: Sequence[str]) -> dict[str, Any]:
    """NAME=VALUE items as a dict, each value JSON where it parses (a bare string otherwise)."""
    settings: dict[str, Any] = {}
    for item in items:
        name, _, value = item.partition("=")
        try:
            settings[name] = json.loads(value)
        except ValueError:
            settings[name] = value
    return settings


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=20.0, help="training wall-clock minutes per run and side")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--recipe", choices=sorted(RECIPES), default="peer")
    p.add_argument("--through", choices=("function", "service"), default="function")
    p.add_argument("--sides", default="ours,peer", help="ours, peer or both (a side not run counts as missing)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="model.X=V|training.X=V",
        help="an override of our side only, e.g. --set model.init=xavier (JSON values)",
    )
    p.add_argument(
        "--peer-set",
        action="append",
        default=[],
        metavar="X=V",
        help="a MarianConfig field of the peer's, e.g. --peer-set decoder_layers=1 (JSON values)",
    )
    p.add_argument("--lang", default="fr")
    p.add_argument("--corpus", type=Path, default=ROOT / "var" / "corpus")
    p.add_argument("--test-size", type=int, default=800, help="test sentences scored (the first N)")
    p.add_argument("--train-pairs", type=int, help="train on a sample of this many training pairs (seed 0)")
    p.add_argument("--threads", type=int, default=2, help="threads a side (in all, with --concurrent)")
    p.add_argument(
        "--concurrent",
        action="store_true",
        help="train both sides at the same time on half the threads each (needs --through service): a 60-minute "
        "pair then takes an hour, and both sides share whatever else loads the machine",
    )
    args = p.parse_args(argv)
    if args.concurrent and args.through != "service":
        p.error("--concurrent needs --through service: two in-process trainings would share one interpreter")
    threads_a_side = max(1, args.threads // 2) if args.concurrent else args.threads
    torch.set_num_threads(threads_a_side)  # the peer's, and the job's through OMP_NUM_THREADS/TORCH_THREADS
    if args.concurrent:  # tokenizers' Rust thread pool too, here and in the service (read at its first use)
        os.environ["RAYON_NUM_THREADS"] = str(threads_a_side)
    corpus = args.corpus / f"en-{args.lang}"
    counts = build_corpus(args.lang, corpus)
    if args.train_pairs is not None:
        corpus = cut_corpus(corpus, args.train_pairs)
        counts["train_used"] = args.train_pairs
    test = read_jsonl(corpus / "test.jsonl")[: args.test_size]
    overrides, peer_overrides = parse_settings(args.set), parse_settings(args.peer_set)
    recipe, sides = RECIPES[args.recipe], args.sides.split(",")
    print(
        f"corpus en-{args.lang}: {counts}; recipe {args.recipe} {recipe}; {args.minutes:g} min a run; "
        f"{threads_a_side} threads a side{', both sides at once' if args.concurrent else ''}; "
        f"ours through {args.through}; overrides {overrides}; the peer's {peer_overrides}"
    )
    load_before = os.getloadavg()[0]
    runs: dict[str, list[dict[str, Any]]] = {"ours": [], "peer": []}
    ours = ours_service if args.through == "service" else ours_function
    for seed in args.seeds:
        side_fns: dict[str, Callable[[], dict[str, Any]]] = {
            "ours": partial(ours, corpus, test, recipe, seed, args.minutes, overrides),
            "peer": partial(peer_run, corpus, test, recipe, seed, args.minutes, peer_overrides),
        }
        chosen = {s: on_threads(threads_a_side, side_fns[s]) for s in ("ours", "peer") if s in sides}
        for side, run in run_sides(chosen, args.concurrent):
            runs[side].append({"seed": seed, **run})
            print(side, json.dumps(runs[side][-1]), flush=True)

    def median(side: str, key: str) -> float | None:
        values = [r[key] for r in runs[side] if r.get(key) is not None]
        return round(statistics.median(values), 2) if values else None

    result: dict[str, Any] = {
        "bench": "quality",
        "recipe": args.recipe,
        "through": args.through,
        "minutes": args.minutes,
        "seeds": args.seeds,
        "lang": args.lang,
        "corpus": counts,  # it grows with the catalogs the machine's packages install
        "test_sentences": len(test),
        "threads": threads_a_side,  # a side's
        "concurrent": args.concurrent,
        "overrides": overrides,
        "peer_overrides": peer_overrides,
        **{f"{side}_{key}": median(side, key) for side in ("ours", "peer") for key in ("bleu", "chrf", "steps")},
        "runs": runs,
        "torch": torch.__version__,
        "load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)],
    }
    ours_bleu, peer_bleu = result["ours_bleu"], result["peer_bleu"]
    result["ratio"] = round(ours_bleu / peer_bleu, 3) if ours_bleu is not None and peer_bleu else None
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
