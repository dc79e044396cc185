"""A job's progress in one line of text: the plain `status --watch` output and the `jobs` table's cells."""

from __future__ import annotations

from typing import Any

TERMINAL = ("succeeded", "failed", "cancelled", "pruned")


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


def done_text(p: dict[str, Any]) -> str:
    """How far a job is by the budget that binds: "40/60" steps, or "12.0/20 min (step 86)" when max_minutes
    ends the run first (the bar is by time then)."""
    if p.get("bound_by") == "time":
        return f"{(p['elapsed_seconds'] or 0) / 60:.1f}/{p['budget_seconds'] / 60:g} min (step {p['step']})"
    return f"{p['step']}/{p['total_steps']}"


def status_line(job: dict[str, Any]) -> str:
    p = job["progress"]
    metrics = job.get("latest_metrics") or {}
    shown = " ".join(
        f"{name}={metrics[name]['value']:.4g}"
        for name in ("train_loss", "valid_loss", "bleu", "exact_match", "masked_token_accuracy")
        if name in metrics
    )
    speed = f"{p['tokens_per_second']:.0f} tok/s" if p["tokens_per_second"] else ""
    return (
        f"{job['status']:<9} {_bar(p['fraction'])} {done_text(p)} {speed} ETA {_duration(p['eta_seconds'])} {shown}"
    ).rstrip()


def preset_line(job: dict[str, Any]) -> str | None:
    """What `submit` and `status --watch` say of a preset left to the worker: that it will choose, or what it chose
    and why; None for a preset the job named."""
    auto = job.get("auto_settings") or {}
    if "preset" not in auto.get("fields", []):
        return None
    chosen = (auto.get("chosen") or {}).get("preset")
    if chosen is None:
        return "preset: auto (the worker chooses when the job starts)"
    return f"preset: {chosen}, chosen by the worker: {(auto.get('reasons') or {}).get('preset', '')}"
