"""A model's card: the README.md every export carries, in the Hugging Face layout, saying where the model came from.

YAML metadata first (languages, licence, library, pipeline tag, tags, and a model-index of its test-set scores),
written by huggingface_hub's ModelCardData, then Markdown: the model, the data it was trained on (names, ids,
rows and sha256 of the files), its settings, the training run (when, how long, on what device), its validation
metrics, its test-set scores with their sacrebleu signatures, the model it started from, and its licence.

card_facts reads them from the database into plain data; render_card writes the card from those alone, so the same
facts give the same card byte for byte (the export's key holds its digest: a card that changes gets a new export).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from app.services.card_facts import CardFacts, PairFacts

# What the card says to load each export with (the export's folder is `folder`).
LIBRARIES = {"native": None, "huggingface": "transformers", "ctranslate2": "ctranslate2"}
PIPELINE_TAGS = {"translation": "translation", "denoising": "fill-mask"}
METRIC_NAMES = {"bleu": "BLEU", "chrf": "chrF", "ter": "TER"}  # as sacrebleu writes them


def _metadata(facts: CardFacts, fmt: str) -> str:
    from huggingface_hub import EvalResult, ModelCardData  # the card alone needs it: not at the API's start

    results = [
        EvalResult(
            task_type="translation",
            task_name="Translation",
            dataset_type=s.dataset.id or "unknown",
            dataset_name=s.dataset.name or f"dataset {s.dataset.id} (deleted)",
            metric_type=metric,
            metric_value=value["score"],
            metric_name=METRIC_NAMES.get(metric, metric),
            metric_args={"signature": value["signature"]} if value.get("signature") else None,
            verified=False,
        )
        for s in facts.scores
        for metric, value in sorted(s.scores.items())
        if isinstance(value, dict) and "score" in value
    ]
    languages = [lang for lang in (facts.source_language, facts.target_language) if lang]
    languages += [lang for pair in facts.pairs for lang in (pair.source, pair.target)]
    data = ModelCardData(
        language=list(dict.fromkeys(languages)) or None,
        license=facts.license,
        library_name=LIBRARIES.get(fmt),
        pipeline_tag=PIPELINE_TAGS.get(facts.objective),
        tags=["transformer", facts.objective, *facts.tags],
        model_name=facts.title if results else None,
        eval_results=results or None,
    )
    return data.to_yaml()


def _table(header: list[str], rows: list[list[Any]]) -> str:
    def cell(value: Any) -> str:
        return "–" if value is None or value == "" else str(value).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _bullets(pairs: list[tuple[str, Any]]) -> str:
    return "\n".join(f"- {name}: {'–' if value is None else value}" for name, value in pairs)


def _settings_block(settings: dict[str, Any]) -> str:
    return "```json\n" + json.dumps(settings, indent=2, sort_keys=True, default=str) + "\n```"


def _usage(fmt: str, folder: str, target: str | None = None) -> str:
    """How to load the export; `target`: a model of several pairs, whose source begins with a target's token."""
    text = f">>{target}<< Hello world." if target else "Hello world."
    if fmt == "huggingface":
        return (
            "```python\nfrom transformers import AutoTokenizer, MarianMTModel\n\n"
            f'tokenizer = AutoTokenizer.from_pretrained("{folder}")\n'
            f'model = MarianMTModel.from_pretrained("{folder}")\n'
            f'batch = tokenizer(["{text}"], return_tensors="pt")\n'
            "print(tokenizer.batch_decode(model.generate(**batch), skip_special_tokens=True))\n```"
        )
    if fmt == "ctranslate2":
        return (
            "```python\nimport ctranslate2\nfrom transformers import AutoTokenizer\n\n"
            f'translator = ctranslate2.Translator("{folder}")\n'
            f'tokenizer = AutoTokenizer.from_pretrained("{folder}")\n'
            f'tokens = tokenizer.convert_ids_to_tokens(tokenizer.encode("{text}"))\n'
            "best = translator.translate_batch([tokens])[0].hypotheses[0]\n"
            "print(tokenizer.decode(tokenizer.convert_tokens_to_ids(best), skip_special_tokens=True))\n```\n\n"
            "An int8-quantized export computes in int8 by default. On an x86 CPU without VNNI (`/proc/cpuinfo` lists "
            "none of `avx512_vnni`, `avx_vnni`, `amx_int8`: Skylake-generation Xeons) int8 sums saturate and some "
            'translations come out wrong; load it there with `compute_type="float32"` (as the service serves it).'
        )
    return (
        "This is the service's own checkpoint folder (`manifest.json` holds every file's sha256): import it into a "
        "service with `POST /v1/models/import` (`python -m app.cli import ARCHIVE`)."
    )


def _beam_note(fmt: str, beam_size: int) -> str:
    """Its owner's default beam, and where the export keeps it."""
    how = "greedily (beam 1)" if beam_size == 1 else f"with a beam of {beam_size}"
    where = {
        "huggingface": f" `generation_config.json` says so (`num_beams: {beam_size}`): `generate()` follows it.",
        "ctranslate2": f" Pass `beam_size={beam_size}` to `translate_batch`.",
    }.get(fmt, "")
    return f"Its owner serves it {how} when a request names no beam.{where}"


def render_card(facts: CardFacts, fmt: str, folder: str) -> str:
    """The README.md of the `fmt` export whose folder is named `folder`."""
    out = [f"---\n{_metadata(facts, fmt)}\n---", f"# {facts.title}"]
    if facts.description:
        out.append(facts.description)
    languages = (
        ", ".join(f"{p.source} → {p.target}" for p in facts.pairs)
        if facts.pairs
        else f"{facts.source_language or '?'} → {facts.target_language or '?'}"
        if facts.source_language or facts.target_language
        else "not declared by its owner"
    )
    out.append(
        "An encoder-decoder Transformer (Vaswani et al., 2017) trained for "
        f"{'translation' if facts.objective == 'translation' else 'masked-span filling (denoising)'}, "
        f"{facts.parameters:,} parameters; languages: {languages}."
    )
    out.append("## Model\n\n" + _table(["setting", "value"], [[k, v] for k, v in facts.config.items()]))
    out.append(
        _bullets(
            [
                ("model id", f"`{facts.model_id}`"),
                ("checkpoint", facts.checkpoint),
                ("weights sha256", f"`{facts.sha256}`"),
            ]
        )
    )
    if facts.parent is not None:
        title, parent_id = facts.parent["title"], facts.parent["id"]
        named = f"{title} (`{parent_id}`)" if title and not title.endswith(parent_id) else f"model `{parent_id}`"
        deleted = "" if title else ", deleted since"
        kept = facts.parent.get("kept_layers")
        if kept:
            out.append(
                f"Cut from {named}{deleted}: it kept {_layers(kept, 'encoder')} and {_layers(kept, 'decoder')} (the "
                "first, the last and evenly between: shrink and fine-tune, Shleifer and Rush, 2020), then trained on."
            )
        else:
            out.append(f"Trained starting from {named}{deleted}.")
    if facts.job is not None:
        job = facts.job
        out.append(
            "## Training data\n\n"
            + _table(
                ["role", "dataset", "id", "rows", "languages", "sha256"],
                [[d.role, d.name or "deleted", d.id, d.rows, d.languages, d.sha256] for d in facts.datasets],
            )
        )
        minutes = f"{job['seconds'] / 60:.1f} minutes" if job["seconds"] is not None else None
        out.append(
            "## Training\n\n"
            + _bullets(
                [
                    ("job", f"`{job['id']}`" + (f" ({job['name']})" if job["name"] else "")),
                    ("started", job["started_at"]),
                    ("finished", job["finished_at"]),
                    ("training time", minutes),
                    ("device", job["device"]),
                    ("worker", job["worker"]),
                    ("steps", job["steps"]),
                    ("tokens seen", f"{job['tokens_seen']:,}" if job["tokens_seen"] else None),
                ]
            )
            + "\n\nModel settings as submitted:\n\n"
            + _settings_block(job["model_settings"])
            + "\n\nTraining settings:\n\n"
            + _settings_block(job["training_settings"])
        )
    else:
        out.append("## Training\n\nImported: this service did not train it, so it cannot say on what data.")
    if facts.pairs:
        out.append(_pairs_section(facts.pairs))
    overall = {k: v for k, v in facts.metrics.items() if "/" not in k}  # a pair's own are in its table
    if overall:
        out.append(
            f"## Validation metrics\n\nOn the validation set{', the mean of the pairs' if facts.pairs else ''}, at "
            "the checkpoint kept:\n\n"
            + _table(["metric", "value"], [[k, round(v, 4)] for k, v in sorted(overall.items())])
        )
    if facts.scores:
        rows = [
            [
                s.dataset.name or "deleted",
                s.dataset.sha256,
                s.sentences,
                s.beam_size,
                metric,
                value.get("score"),
                f"`{value['signature']}`" if value.get("signature") else None,
            ]
            for s in facts.scores
            for metric, value in sorted(s.scores.items())
            if isinstance(value, dict) and "score" in value  # not the confidence split
        ]
        out.append(
            "## Test-set scores\n\nsacrebleu, with the signature that makes each score reproducible:\n\n"
            + _table(["test set", "sha256", "sentences", "beam", "metric", "score", "signature"], rows)
        )
    else:
        out.append("## Test-set scores\n\nNone yet: `POST /v1/models/{id}/evaluations` scores it on a test set.")
    out.append(f"## How to use\n\n{_usage(fmt, folder, facts.pairs[0].target if facts.pairs else None)}")
    if facts.beam_size is not None:
        out.append(_beam_note(fmt, facts.beam_size))
    out.append(
        "## Licence\n\n"
        + (
            f"`{facts.license}`, as its owner set it."
            if facts.license
            else "Not set by its owner (`PATCH /v1/models/{id}` with `license`): ask them before you share it."
        )
    )
    return "\n\n".join(out) + "\n"


def _layers(kept: dict[str, Any], stack: str) -> str:
    """'encoder layers 0, 2 and 5 of 6', 'decoder layer 0 of 3', 'all 3 encoder layers'."""
    layers, of = kept[stack], kept[f"{stack}_of"]
    if len(layers) == of:
        return f"all {of} {stack} layers"
    numbers = ", ".join(map(str, layers[:-1])) + f" and {layers[-1]}" if len(layers) > 1 else str(layers[0])
    return f"{stack} layer{'s' if len(layers) > 1 else ''} {numbers} of {of}"


def _pairs_section(pairs: list[PairFacts]) -> str:
    rows: list[list[Any]] = [
        [f"{p.source} → {p.target}", p.dataset.name or ("deleted" if p.dataset.id else "–"), p.dataset.rows]
        + [round(p.metrics[name], 2) if name in p.metrics else None for name in ("bleu", "chrf", "valid_loss")]
        for p in pairs
    ]
    return (
        "## Language pairs\n\nOne model for every pair (Johnson et al., 2017): a source begins with the token of the "
        f"language to translate into (`>>{pairs[0].target}<<`, as the OPUS-MT models write it). Validation scores "
        "of each pair at the checkpoint kept:\n\n"
        + _table(["pair", "dataset", "rows", "BLEU", "chrF", "validation loss"], rows)
    )


def card_digest(card: str) -> str:
    """12 hex digits of the card's sha256: part of its export's key."""
    return hashlib.sha256(card.encode("utf-8")).hexdigest()[:12]
