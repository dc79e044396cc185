"""Client commands of `python -m app.cli`: talk to a running server over HTTP (httpx).

The server is `--url` (or $TRANSFORMER_URL, default http://127.0.0.1:8000); the key is `--key` (or
$TRANSFORMER_API_KEY, or the local key that `make run` saved in $DATA_DIR/local-api-key).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import httpx

TERMINAL = ("succeeded", "failed", "cancelled")


def add_connection_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", default=os.environ.get("TRANSFORMER_URL", "http://127.0.0.1:8000"))
    parser.add_argument("--key", default=os.environ.get("TRANSFORMER_API_KEY"))


def _client(args: argparse.Namespace) -> httpx.Client:
    key = args.key
    if not key:
        local = Path(os.environ.get("DATA_DIR", "var")) / "local-api-key"
        if not local.exists():
            sys.exit("error: no API key: pass --key, set TRANSFORMER_API_KEY, or run `make run` once")
        key = local.read_text().strip()
    return httpx.Client(base_url=args.url, headers={"Authorization": f"Bearer {key}"}, timeout=60)


def _check(response: httpx.Response) -> Any:
    if response.status_code >= 400:
        try:
            detail = response.json().get("detail")
        except ValueError:
            detail = response.text
        if isinstance(detail, list):
            detail = "; ".join(f"{'.'.join(str(p) for p in d.get('loc', [])[1:])}: {d.get('msg')}" for d in detail)
        sys.exit(f"error {response.status_code}: {detail}")
    return response.json() if response.content else None


def _print(obj: Any) -> None:
    print(json.dumps(obj, indent=2, default=str))


def cmd_upload(args: argparse.Namespace) -> None:
    path = Path(args.file)
    with _client(args) as client, open(path, "rb") as f:
        dataset = _check(
            client.post(
                "/v1/datasets", data={"name": args.name or path.name, "kind": args.kind}, files={"file": (path.name, f)}
            )
        )
    print(f"dataset {dataset['id']}: {dataset['rows']} rows ({dataset['kind']}, {dataset['format']})", file=sys.stderr)
    print(dataset["id"])


def _parse_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def cmd_submit(args: argparse.Namespace) -> None:
    body: dict[str, Any] = {
        "objective": args.objective,
        "dataset_id": args.dataset,
        "model": {"preset": args.preset},
        "training": {},
    }
    if args.valid:
        body["valid_dataset_id"] = args.valid
    if args.init_model:
        body["init_model_id"] = args.init_model
    if args.max_steps:
        body["training"]["max_steps"] = args.max_steps
    for assignment in args.set or []:
        name, _, value = assignment.partition("=")
        section, _, field = name.partition(".")
        if section not in ("model", "training") or not field or not _:
            sys.exit(f"error: --set {assignment!r}: expected model.FIELD=VALUE or training.FIELD=VALUE")
        body[section][field] = _parse_value(value)
    headers = {"Idempotency-Key": args.idempotency_key} if args.idempotency_key else {}
    with _client(args) as client:
        job = _check(client.post("/v1/jobs", json=body, headers=headers))
    print(f"job {job['id']}: {job['status']}", file=sys.stderr)
    print(job["id"])


def _bar(fraction: float, width: int = 30) -> str:
    filled = int(round(fraction * width))
    return "[" + "#" * filled + "." * (width - filled) + "]"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "--:--"
    seconds = int(seconds)
    return (
        f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"
        if seconds >= 3600
        else f"{seconds // 60:02d}:{seconds % 60:02d}"
    )


def status_line(job: dict[str, Any]) -> str:
    p = job["progress"]
    metrics = job.get("latest_metrics") or {}
    shown = " ".join(
        f"{name}={metrics[name]['value']:.4g}"
        for name in ("train_loss", "valid_loss", "bleu", "exact_match", "masked_token_accuracy")
        if name in metrics
    )
    speed = f"{p['tokens_per_second']:.0f} tok/s" if p["tokens_per_second"] else ""
    done = f"{p['step']}/{p['total_steps']}"
    if p.get("bound_by") == "time":  # max_minutes ends the run first: the bar is by time
        done = f"{(p['elapsed_seconds'] or 0) / 60:.1f}/{p['budget_seconds'] / 60:g} min (step {p['step']})"
    return (
        f"{job['status']:<9} {_bar(p['fraction'])} {done} {speed} ETA {_duration(p['eta_seconds'])} {shown}"
    ).rstrip()


def cmd_status(args: argparse.Namespace) -> None:
    with _client(args) as client:
        while True:
            job = _check(client.get(f"/v1/jobs/{args.job}"))
            if not args.watch:
                _print(job)
                return
            end = "\n" if job["status"] in TERMINAL or not sys.stdout.isatty() else ""
            print("\r" + status_line(job), end=end, flush=True)
            if job["status"] in TERMINAL:
                if job["error"]:
                    print(f"error: {job['error']}")
                if job["model_id"]:
                    print(f"model: {job['model_id']}")
                sys.exit(0 if job["status"] == "succeeded" else 1)
            time.sleep(args.interval)


def cmd_jobs(args: argparse.Namespace) -> None:
    params: dict[str, Any] = {"tag": args.tag or []}
    if args.status:
        params["status"] = args.status
    if args.objective:
        params["objective"] = args.objective
    with _client(args) as client:
        for job in _check(client.get("/v1/jobs", params=params))["data"]:
            labels = " ".join([*([repr(job["name"])] if job.get("name") else []), *job.get("tags", [])])
            print(f"{job['id']}  {job['objective']:<11} {status_line(job)}{'  ' + labels if labels else ''}")


def cmd_tag(args: argparse.Namespace) -> None:
    """Add and remove tags, set the name or the note (PATCH /v1/jobs/{id}); prints the job's labels."""
    body: dict[str, Any] = {}
    with _client(args) as client:
        if args.add or args.remove:
            tags = _check(client.get(f"/v1/jobs/{args.job}"))["tags"]
            body["tags"] = [t for t in tags if t not in (args.remove or [])] + (args.add or [])
        if args.name is not None:
            body["name"] = args.name
        if args.note is not None:
            body["note"] = args.note
        if not body:
            sys.exit("error: nothing to change: give --add, --remove, --name or --note")
        job = _check(client.patch(f"/v1/jobs/{args.job}", json=body))
    print(f"{job['id']}  name={job['name']!r} tags={','.join(job['tags'])}")


def _cell(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def comparison_table(comparison: dict[str, Any]) -> str:
    """The settings that differ, then each metric's best and final value, one column per job."""
    jobs = comparison["jobs"]
    rows = [["", *[job["name"] or job["id"][:8] for job in jobs]]]
    rows += [[key, *[_cell(job["settings"].get(key)) for job in jobs]] for key in comparison["differing"]]
    for name in sorted({name for job in jobs for name in job["metrics"]}):
        for which in ("best", "final"):
            cells = [job["metrics"].get(name, {}).get(which) for job in jobs]
            if any(cell is not None for cell in cells):
                rows.append([f"{name} ({which})", *["-" if c is None else _cell(c) for c in cells]])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows)


def cmd_compare(args: argparse.Namespace) -> None:
    with _client(args) as client:
        comparison = _check(client.get("/v1/jobs/compare", params={"ids": ",".join(args.jobs)}))
    print(comparison_table(comparison))


def cmd_models(args: argparse.Namespace) -> None:
    with _client(args) as client:
        for model in _check(client.get("/v1/models"))["data"]:
            metrics = " ".join(f"{k}={v:.4g}" for k, v in sorted(model["metrics"].items()))
            print(f"{model['id']}  {model['objective']:<11} {model['parameters']:>11,} params  {metrics}")


def cmd_export(args: argparse.Namespace) -> None:
    """Download a model's export, waiting while the service builds it (202 + Retry-After); written whole or not
    at all (a .partial file renamed at the end)."""
    params = {"format": args.format, **({"quantization": args.quantization} if args.quantization else {})}
    with _client(args) as client:
        for _ in range(args.retries + 1):
            with client.stream("GET", f"/v1/models/{args.model}/export", params=params, timeout=300) as response:
                if response.status_code == 202:
                    wait = float(response.headers.get("retry-after", "10"))
                    print(f"the export is being built; retrying in {wait:g}s", file=sys.stderr)
                    time.sleep(wait)
                    continue
                if response.status_code >= 400:
                    response.read()
                    _check(response)
                disposition = response.headers.get("content-disposition", "")
                name = (
                    disposition.split('filename="')[-1].rstrip('"') if 'filename="' in disposition else "export.tar.gz"
                )
                out = Path(args.output or name)
                partial = out.with_name(out.name + ".partial")
                with open(partial, "wb") as f:
                    for chunk in response.iter_bytes():
                        f.write(chunk)
                partial.rename(out)
                print(out)
                return
        sys.exit(f"error: the export was still being built after {args.retries} retries; run the command again")


def cmd_evaluate(args: argparse.Namespace) -> None:
    """Score a model on a parallel dataset and print BLEU, chrF and chrF++ with their sacrebleu signatures; with
    -o, also write the hypotheses (one line per row)."""
    body = {"dataset_id": args.dataset, "beam_size": args.beam_size, "alpha": args.alpha, "tokenize": args.tokenize}
    with _client(args) as client:
        evaluation = _check(client.post(f"/v1/models/{args.model}/evaluations", json=body))
        path = f"/v1/models/{args.model}/evaluations/{evaluation['id']}"
        while evaluation["status"] in ("queued", "running"):
            print(
                f"evaluation {evaluation['id']}: {evaluation['status']} {evaluation['progress']:.0%}", file=sys.stderr
            )
            time.sleep(args.interval)
            evaluation = _check(client.get(path))
        if evaluation["status"] != "succeeded":
            sys.exit(f"error: evaluation {evaluation['id']} {evaluation['status']}: {evaluation['error']}")
        for name, value in evaluation["scores"].items():
            if isinstance(value, dict):
                print(f"{name:7} {value['score']:7.2f}  {value['signature']}")
        if args.output:
            response = client.get(f"{path}/hypotheses")
            if response.status_code >= 400:
                _check(response)
            Path(args.output).write_bytes(response.content)
            print(f"hypotheses: {args.output}", file=sys.stderr)


def cmd_import(args: argparse.Namespace) -> None:
    """Upload a model archive (a native export); prints the new model's id."""
    path = Path(args.file)
    with _client(args) as client, open(path, "rb") as f:
        response = client.post("/v1/models/import", files={"file": (path.name, f)}, timeout=300)
    if response.status_code == 202:
        print(f"still being imported: {response.json()['detail']}", file=sys.stderr)
        print(response.json()["id"])
        return
    model = _check(response)
    print(f"model {model['id']}: {model['objective']}, {model['parameters']:,} parameters", file=sys.stderr)
    print(model["id"])


def cmd_translate(args: argparse.Namespace) -> None:
    """Translate a text file in the background, wait, and write the result (same lines, translated)."""
    path = Path(args.file)
    with _client(args) as client:
        with open(path, "rb") as f:
            row = _check(
                client.post(
                    f"/v1/models/{args.model}/translations",
                    files={"file": (path.name, f)},
                    data={"beam_size": str(args.beam_size), "language": args.language},
                    timeout=300,
                )
            )
        url = f"/v1/models/{args.model}/translations/{row['id']}"
        while row["status"] in ("queued", "running"):
            print(f"translation {row['id']}: {row['status']} {row['progress']:.0%}", file=sys.stderr)
            time.sleep(args.interval)
            row = _check(client.get(url))
        if row["status"] != "succeeded":
            sys.exit(f"error: translation {row['id']} {row['status']}: {row['error']}")
        response = client.get(row["result_url"])
        if response.status_code >= 400:
            _check(response)
    out = Path(args.output or path.with_name(f"{path.stem}.{args.model[:8]}{path.suffix or '.txt'}"))
    out.write_bytes(response.content)
    print(out)


def add_client_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("upload", help="upload a dataset file; prints its id")
    p.add_argument("file")
    p.add_argument("--kind", choices=("parallel", "monolingual"), required=True)
    p.add_argument("--name")
    p.set_defaults(func=cmd_upload)
    p = sub.add_parser("submit", help="submit a training job; prints its id")
    p.add_argument("--dataset", required=True)
    p.add_argument("--valid")
    p.add_argument("--objective", choices=("translation", "denoising"), default="translation")
    p.add_argument("--preset", choices=("tiny", "small", "base", "big"), default="tiny")
    p.add_argument("--init-model", metavar="MODEL", help="start from this model's weights and tokenizer (fine-tuning)")
    p.add_argument("--max-steps", type=int)
    p.add_argument(
        "--set",
        action="append",
        metavar="SECTION.FIELD=VALUE",
        help="any model or training field, e.g. --set training.warmup_steps=100 --set model.vocab_size=2000",
    )
    p.add_argument("--idempotency-key")
    p.set_defaults(func=cmd_submit)
    p = sub.add_parser("status", help="show a job; --watch draws a progress bar with ETA until it ends")
    p.add_argument("job")
    p.add_argument("--watch", action="store_true")
    p.add_argument("--interval", type=float, default=2.0)
    p.set_defaults(func=cmd_status)
    p = sub.add_parser("jobs", help="list jobs")
    p.add_argument("--status", choices=("queued", "running", "succeeded", "failed", "cancelled"))
    p.add_argument("--objective", choices=("translation", "denoising"))
    p.add_argument("--tag", action="append", help="only jobs with this tag (repeat: with every one of them)")
    p.set_defaults(func=cmd_jobs)
    p = sub.add_parser("tag", help="add or remove a job's tags, set its name or note")
    p.add_argument("job")
    p.add_argument("--add", action="append", metavar="TAG")
    p.add_argument("--remove", action="append", metavar="TAG")
    p.add_argument("--name")
    p.add_argument("--note")
    p.set_defaults(func=cmd_tag)
    p = sub.add_parser("compare", help="compare 2 to 10 jobs: the settings that differ, best and final metrics")
    p.add_argument("jobs", nargs="+", metavar="JOB")
    p.set_defaults(func=cmd_compare)
    p = sub.add_parser("models", help="list trained models")
    p.set_defaults(func=cmd_models)
    p = sub.add_parser("export", help="download a model as a .tar.gz (native, huggingface or ctranslate2)")
    p.add_argument("model")
    p.add_argument("--format", choices=("native", "huggingface", "ctranslate2"), default="native")
    p.add_argument("--quantization", help="ctranslate2 only, e.g. int8")
    p.add_argument("-o", "--output", help="file to write (default: the name the service gives)")
    p.add_argument("--retries", type=int, default=30, help="times to wait while the export is being built")
    p.set_defaults(func=cmd_export)
    p = sub.add_parser("evaluate", help="score a model on a parallel dataset: BLEU, chrF, chrF++ (sacrebleu)")
    p.add_argument("model")
    p.add_argument("--dataset", required=True, help="a parallel dataset id: sources translated, targets the references")
    p.add_argument("--beam-size", type=int, default=4)
    p.add_argument("--alpha", type=float, default=0.6, help="GNMT length penalty exponent, 0 to 2 (as /translate)")
    p.add_argument("--tokenize", default="13a", help="sacrebleu's BLEU tokenizer: 13a, intl, zh, ja-mecab, ...")
    p.add_argument("-o", "--output", help="also write the hypotheses to this file")
    p.add_argument("--interval", type=float, default=2.0)
    p.set_defaults(func=cmd_evaluate)
    p = sub.add_parser("import", help="upload a model archive (an export with --format native); prints its id")
    p.add_argument("file")
    p.set_defaults(func=cmd_import)
    p = sub.add_parser("translate", help="translate a text file (one segment a line); writes the translated file")
    p.add_argument("model")
    p.add_argument("file")
    p.add_argument("-o", "--output", help="file to write (default: FILE with the model's short id before the suffix)")
    p.add_argument("--beam-size", type=int, default=4)
    p.add_argument("--language", default="en", help="the source's language, for sentence splitting")
    p.add_argument("--interval", type=float, default=1.0)
    p.set_defaults(func=cmd_translate)
    for name in "upload submit status jobs tag compare models export evaluate import translate".split():
        add_connection_arguments(sub.choices[name])
