"""A dataset's data report as a few lines of text: what `upload` prints when the worker is done, and `dataset ID`."""

from __future__ import annotations

from typing import Any

PROBLEM_LABELS = {
    "empty": "empty side",
    "invalid_characters": "invalid characters",
    "ratio_outliers": "length-ratio outliers",
    "duplicates": "duplicate pairs",
    "duplicate_sources": "sources with another target",
    "number_mismatches": "number mismatches",
    "placeholder_mismatches": "placeholder mismatches",
    "copies": "target copies source",
    "wrong_language_source": "source not in its language",
    "wrong_language_target": "target not in its language",
    "wrong_language_text": "text not in its language",
    "misaligned": "misaligned pairs",
}


def _lengths(side: str, info: dict[str, Any]) -> str:
    words = info["words"]
    p = words["percentiles"]
    return (
        f"  {side:<7} words median {p['p50']:g}, p95 {p['p95']:g}, max {words['max']:,}; "
        f"{info['characters']['total']:,} characters" + _language(info.get("language") or {})
    )


def _language(language: dict[str, Any]) -> str:
    detected = language.get("detected") or []
    if not detected:
        return ""
    top = ", ".join(f"{d['language']} {d['share']:.0%}" for d in detected[:3])
    declared = language.get("declared")
    return f"; detected {top}" + (f" (declared {declared})" if declared else "")


def summary_lines(dataset: dict[str, Any], report: dict[str, Any] | None) -> list[str]:
    """The dataset's headline, then per side its lengths and languages, then each problem found with its count,
    share and first example's line."""
    lines = [
        f"{dataset['name']} ({dataset['id']}): {dataset['status']}, {dataset['rows']:,} rows, "
        f"{dataset['kind']} {dataset['format']}{', gzip' if dataset.get('compression') == 'gzip' else ''}"
    ]
    if dataset.get("error"):
        lines.append(f"  error: {dataset['error']}")
    if dataset.get("filter_counts"):
        counts = dataset["filter_counts"]
        removed = ", ".join(f"{rule} {n:,}" for rule, n in counts["removed"].items())
        lines.append(
            f"  filtered from {dataset['parent_id']}: kept {counts['kept']:,} of {counts['total']:,} ({removed})"
        )
    if not report:
        return lines
    for side, info in report["sides"].items():
        lines.append(_lengths(side, info))
    found = [(name, p) for name, p in report["problems"].items() if p["count"]]
    if not found:
        lines.append("  no problems found")
    for name, p in found:
        example = f", e.g. line {p['examples'][0]['line']}" if p.get("examples") else ""
        estimate = f" (about {p['estimated']:,} in all)" if p.get("sampled") else ""
        lines.append(f"  {PROBLEM_LABELS.get(name, name):<30} {p['count']:>9,}  {p['share']:>7.2%}{estimate}{example}")
    return lines
