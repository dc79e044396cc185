"""A MarianMTModel folder as Helsinki-NLP/OPUS-MT publishes them, built locally (nothing is downloaded)."""

from __future__ import annotations

import json
from pathlib import Path

import sentencepiece as spm
import torch
import transformers

from model.data.demo import grammar_sentences, numbers_to_words_task


def _train_spm(lines: list[str], prefix: Path, vocab_size: int) -> Path:
    prefix.with_suffix(".txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    spm.SentencePieceTrainer.train(
        input=str(prefix.with_suffix(".txt")),
        model_prefix=str(prefix),
        vocab_size=vocab_size,
        model_type="unigram",
        character_coverage=1.0,
        bos_id=-1,
        eos_id=0,  # as Marian: </s> 0, <unk> 1
        unk_id=1,
        pad_id=-1,
    )
    return prefix.with_suffix(".model")


# Helsinki-NLP/opus-mt-en-de's sizes: 74M parameters, a 298 MB model.safetensors.
OPUS_MT_EN_DE = {"d_model": 512, "layers": 6, "heads": 8, "ffn": 2048, "vocab_size": 58101, "train_steps": 0}


def build_marian_folder(
    tmp: Path,
    *,
    d_model: int = 32,
    layers: int = 2,
    heads: int = 4,
    ffn: int = 64,
    vocab_size: int | None = None,
    train_steps: int = 200,
) -> Path:
    """tmp/opus-mt-en-de: a small MarianMTModel trained briefly on number words, with source.spm, target.spm
    (unigram SentencePiece) and vocab.json as OPUS-MT publishes them. With OPUS_MT_EN_DE's sizes, one as large as
    the real en-de model (its vocabulary padded with pieces neither SentencePiece model makes), untrained."""
    pairs = numbers_to_words_task(400, seed=0)
    grammar = grammar_sentences(300, seed=0)
    source = _train_spm([s for s, _ in pairs] + grammar, tmp / "source", 100)
    target = _train_spm([t for _, t in pairs] + grammar, tmp / "target", 100)
    pieces: dict[str, int] = {"</s>": 0, "<unk>": 1}
    for path in (source, target):
        processor = spm.SentencePieceProcessor(model_file=str(path))
        for i in range(processor.get_piece_size()):
            pieces.setdefault(processor.id_to_piece(i), len(pieces))
    while vocab_size is not None and len(pieces) < vocab_size - 1:
        pieces[f"▁unused{len(pieces)}"] = len(pieces)
    pieces["<pad>"] = len(pieces)
    (tmp / "vocab.json").write_text(json.dumps(pieces, ensure_ascii=False))
    size, pad = len(pieces), pieces["<pad>"]
    config = transformers.MarianConfig(
        vocab_size=size,
        decoder_vocab_size=size,
        d_model=d_model,
        encoder_layers=layers,
        decoder_layers=layers,
        encoder_attention_heads=heads,
        decoder_attention_heads=heads,
        encoder_ffn_dim=ffn,
        decoder_ffn_dim=ffn,
        max_position_embeddings=64 if vocab_size is None else 512,
        pad_token_id=pad,
        eos_token_id=0,
        decoder_start_token_id=pad,
        forced_eos_token_id=None,
        activation_function="swish",
        scale_embedding=True,  # as every OPUS-MT config (MarianConfig's default is False)
        static_position_embeddings=True,
    )
    torch.manual_seed(0)
    model = transformers.MarianMTModel(config)
    tokenizer = transformers.MarianTokenizer(
        source_spm=str(source), target_spm=str(target), vocab=str(tmp / "vocab.json")
    )
    # A few hundred steps on the numbers: outputs that follow the input, not one token repeated (random weights
    # give that), so equal outputs say something.
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    for step in range(train_steps):
        chunk = pairs[(step * 32) % 384 : (step * 32) % 384 + 32]
        batch = tokenizer([s for s, _ in chunk], text_target=[t for _, t in chunk], return_tensors="pt", padding=True)
        batch["labels"][batch["labels"] == pad] = -100
        model(**batch).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.eval()
    folder = tmp / "opus-mt-en-de"
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    return folder
