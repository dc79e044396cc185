"""Sequence-level distillation on a real corpus, over HTTP: a student trained on its teacher's translations against
the same student trained on the original pairs, and against the teacher, in quality and in CPU translation speed.

The data are the gettext catalogs' en-fr (bench/corpus.py: train, valid and test parts by a hash of the source). On
the embedded service, as a user would:

- teacher: a job on the training part for --teacher-minutes with --teacher-preset;
- student on the original pairs: a job with --student-preset for --minutes;
- distilled student: POST /v1/pipelines kind distillation at its defaults (the teacher translates the training
  sources by beam 4; the student, with --student-preset, trains on those translations for --minutes).

All three translate the test part (beam 4, as a user's request: CTranslate2 int8 on this CPU by default), timed
over HTTP (64 sentences a request). Prints one JSON object last: BLEU, chrF and sentences/s of each;
`beats_original` (goal: true), `bleu_below_teacher` (goal <= 2), `speedup` (student / teacher sentences/s, goal >= 3)
and `ratio` = distilled student BLEU / original-data student BLEU; each model also decodes greedily (`greedy`), and
`greedy_student` gives the same three for the distilled student's greedy decoding against the teacher's beam 4.

    .venv/bin/python bench/distillation.py [--teacher-minutes 20] [--minutes 10] [--teacher-preset small]
        [--student-preset small --student-model '{"n_decoder_layers": 1}'] [--student-init teacher]
        [--original-share 0.5]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from bench.backtranslation import score, upload, wait_job, wait_pipeline  # noqa: E402
from bench.corpus import build  # noqa: E402
from bench.service_session import embedded_service, translate_all  # noqa: E402


def timed(client: httpx.Client, model: str, sources: list[str], beam_size: int = 4) -> tuple[list[str], float]:
    """The model's translations of the sources and its sentences a second over HTTP (a warm-up request first: the
    model's loading and CTranslate2 conversion are not the decoder's speed)."""
    translate_all(client, model, sources[:8], beam_size)
    started = time.monotonic()
    hyps = translate_all(client, model, sources, beam_size)
    return hyps, round(len(sources) / (time.monotonic() - started), 2)


def main() -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--teacher-minutes", type=float, default=20.0)
    p.add_argument("--minutes", type=float, default=10.0, help="each student's job")
    p.add_argument("--teacher-preset", default="small")
    p.add_argument("--student-preset", default="tiny")
    p.add_argument(
        "--student-model",
        type=json.loads,
        default={},
        help='overrides of both students\' model section as JSON, e.g. {"n_decoder_layers": 1} (a deep encoder and a '
        "shallow decoder: Kasai et al., 2021)",
    )
    p.add_argument(
        "--student-init",
        choices=("fresh", "teacher"),
        default="fresh",
        help="both students' start: fresh weights of --student-preset, or the teacher's layers cut to "
        "--student-model's n_encoder_layers and n_decoder_layers (the pipeline's student_init; shrink and fine-tune)",
    )
    p.add_argument(
        "--original-share", type=float, help="the pipeline's original_share: the original pairs' share of the rows"
    )
    p.add_argument("--test-size", type=int, default=1000)
    p.add_argument("--out", type=Path, default=ROOT / "var" / "corpus" / "en-fr")
    args = p.parse_args()
    build("fr", args.out, max_chars=200, valid_per_mille=20, test_per_mille=20)
    test = [json.loads(line) for line in (args.out / "test.jsonl").read_text(encoding="utf-8").splitlines()]
    test_rows = [(row["source"], row["target"]) for row in test[: args.test_size]]
    sources = [s for s, _ in test_rows]
    out: dict = {"bench": "distillation", "teacher_minutes": args.teacher_minutes, "minutes": args.minutes}
    with embedded_service("distillation-") as client:
        languages = {"source_language": "en", "target_language": "fr"}
        train = upload(client, args.out / "train.jsonl", "parallel", **languages)
        valid = upload(client, args.out / "valid.jsonl", "parallel", **languages)

        def job(model: dict, minutes: float, **extra: str) -> dict:
            body = {
                "objective": "translation", "dataset_id": train, "valid_dataset_id": valid, "model": model,
                "training": {"max_minutes": minutes}, **languages, **extra,
            }  # fmt: skip
            made = client.post("/v1/jobs", json=body)
            made.raise_for_status()
            return wait_job(client, made.json()["id"], minutes)

        results: dict[str, dict] = {}
        student_model = {"preset": args.student_preset, **args.student_model}
        out["student_model"], out["student_init"] = student_model, args.student_init
        teacher = job({"preset": args.teacher_preset}, args.teacher_minutes)
        from_teacher = {"init_model_id": teacher["model_id"]} if args.student_init == "teacher" else {}
        student = job(student_model, args.minutes, **from_teacher)
        request = {
            "kind": "distillation", "name": "gettext-student", "teacher_model_id": teacher["model_id"],
            "dataset_id": train, "valid_dataset_id": valid, "student_init": args.student_init,
            "job": {"model": student_model, "training": {"max_minutes": args.minutes}},
        }  # fmt: skip
        if args.original_share:
            request["original_share"] = out["original_share"] = args.original_share
        created = client.post("/v1/pipelines", json=request)
        if created.status_code != 201:
            raise SystemExit(f"the pipeline was refused: {created.text}")
        done = wait_pipeline(client, created.json()["id"], args.minutes * 60 + 5400)
        translation = client.get(done["steps"][0]["url"]).json()
        out["teacher_translation"] = {"sentences": translation["sentences"], "backend": translation["backend"]}
        for step in done["steps"]:
            if step["name"] == "clean":  # the rows the pipeline's cleaning removed from the teacher's pairs
                cleaned = client.get(f"/v1/datasets/{step['output']['dataset_id']}").json()
                out["teacher_translation"]["cleaning"] = cleaned["filter_counts"]
        # The teacher's targets against the originals: mean characters and the problems the data report counts
        # (a teacher that cuts sentences short or repeats itself teaches the student to)
        for name, dataset in (("original", train), ("distilled", translation["output_dataset_id"])):
            report = client.get(f"/v1/datasets/{dataset}/report").json()
            out["teacher_translation"][name] = {
                "target_mean_chars": report["sides"]["target"]["characters"]["mean"],
                "problems": {k: v["estimated"] for k, v in report["problems"].items() if v["estimated"]},
            }
        for name, model, preset in (
            ("teacher", teacher["model_id"], args.teacher_preset),
            ("student_original", student["model_id"], args.student_preset),
            ("student_distilled", done["model_id"], args.student_preset),
        ):
            hyps, speed = timed(client, model, sources)
            results[name] = {"preset": preset, **score(hyps, test_rows), "sentences_per_second": speed}
            hyps, speed = timed(client, model, sources, beam_size=1)
            results[name]["greedy"] = {**score(hyps, test_rows), "sentences_per_second": speed}
            print(name, json.dumps(results[name]))
    out |= results
    distilled, original, teacher_scores = results["student_distilled"], results["student_original"], results["teacher"]
    out["beats_original"] = distilled["bleu"] > original["bleu"]
    out["bleu_below_teacher"] = round(teacher_scores["bleu"] - distilled["bleu"], 2)
    out["speedup"] = round(distilled["sentences_per_second"] / teacher_scores["sentences_per_second"], 2)
    out["ratio"] = round(distilled["bleu"] / max(original["bleu"], 1e-9), 3)
    # Kim and Rush's reading: a distilled student decodes greedily at about its beam's quality; against the teacher's
    # beam 4, as above
    greedy = distilled["greedy"]
    out["greedy_student"] = {
        "beats_original": greedy["bleu"] > original["greedy"]["bleu"],
        "bleu_below_teacher": round(teacher_scores["bleu"] - greedy["bleu"], 2),
        "speedup": round(greedy["sentences_per_second"] / teacher_scores["sentences_per_second"], 2),
    }
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
