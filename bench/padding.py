"""How much of each training batch is padding: the batcher's plan of one epoch on a real corpus, counted (no
timing, so the figures are exact and the same on any machine).

    python bench/padding.py --corpus var/corpus/en-fr --max-tokens 4096 1500

The corpus is bench/corpus.py's (built if missing); the tokenizer is the product's, trained on the training
side as a job would (the "ours" recipe's vocabulary by default). For each batch size the script prints the
real and padded source and target tokens of every batch of epoch 0 and the padding share of each side; the
last line is one JSON object with all of it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.corpus import build as build_corpus  # noqa: E402
from model.data.batching import Example, TokenBatcher, collate  # noqa: E402


def count(examples: list[Example], max_tokens: int, seed: int) -> dict[str, Any]:
    """Real and padded tokens of one epoch's batches (src: ids + </s>; tgt: what the decoder predicts)."""
    batcher = TokenBatcher(examples, max_tokens, shuffle=True, seed=seed)
    real_src = padded_src = real_tgt = padded_tgt = 0
    for idx in batcher.batch_indices(0):
        batch = collate([examples[i] for i in idx], idx)
        real_src, padded_src = real_src + batch.n_src_tokens, padded_src + batch.padded_src_tokens
        real_tgt, padded_tgt = real_tgt + batch.n_tgt_tokens, padded_tgt + batch.padded_tgt_tokens
    return {
        "max_tokens": max_tokens,
        "batches": len(batcher),
        "real_src": real_src,
        "padded_src": padded_src,
        "real_tgt": real_tgt,
        "padded_tgt": padded_tgt,
        "src_padding_share": round(1 - real_src / padded_src, 4),
        "tgt_padding_share": round(1 - real_tgt / padded_tgt, 4),
        "padding_share": round(1 - (real_src + real_tgt) / (padded_src + padded_tgt), 4),
    }


def main() -> None:
    from model.data.corpus import read_parallel
    from model.train.prepare import prepare
    from model.train.settings import DataSettings

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", type=Path, default=ROOT / "var" / "corpus" / "en-fr")
    p.add_argument("--lang", default="fr")
    p.add_argument("--vocab-size", type=int, default=8000)
    p.add_argument("--max-tokens", type=int, nargs="+", default=[4096, 1500])
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if not (args.corpus / "train.jsonl").exists():
        build_corpus(args.lang, args.corpus)
    data = prepare(
        "translation",
        read_parallel(args.corpus / "train.jsonl"),
        read_parallel(args.corpus / "valid.jsonl"),
        preset="small",
        vocab_size=args.vocab_size,
        settings=DataSettings(),
        seed=args.seed,
    )
    examples = list(data.train_examples) if not callable(data.train_examples) else list(data.train_examples(0))
    rows = [count(examples, n, args.seed) for n in args.max_tokens]
    for row in rows:
        print(
            f"max_tokens {row['max_tokens']}: {row['batches']} batches; padding {row['src_padding_share']:.1%} "
            f"of source, {row['tgt_padding_share']:.1%} of target tokens",
            file=sys.stderr,
        )
    print(json.dumps({"corpus": str(args.corpus), "examples": len(examples), "rows": rows}))


if __name__ == "__main__":
    main()
