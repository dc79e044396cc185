"""The peer of the training benchmark: Hugging Face MarianMTModel of the same size as one of our configs.

Built from a MarianConfig (nothing is downloaded): post-norm, ReLU, sinusoidal positions, scaled and shared
embeddings, dropout on residuals, embeddings and inside the FFN (activation_dropout), like ours.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import torch
import torch.nn.functional as F

from model.data.batching import Batch
from model.nn.config import ModelConfig
from model.train.config import TrainConfig
from model.train.step import build_optimizer


def marian_model(config: ModelConfig) -> torch.nn.Module:
    from transformers import MarianConfig, MarianMTModel

    marian = MarianConfig(
        vocab_size=config.vocab_size,
        d_model=config.d_model,
        encoder_layers=config.n_encoder_layers,
        decoder_layers=config.n_decoder_layers,
        encoder_attention_heads=config.n_heads,
        decoder_attention_heads=config.n_heads,
        encoder_ffn_dim=config.d_ff,
        decoder_ffn_dim=config.d_ff,
        activation_function=config.activation,
        dropout=config.dropout,
        attention_dropout=config.attention_dropout,
        activation_dropout=config.dropout,
        max_position_embeddings=config.max_positions,
        scale_embedding=True,
        share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True,
        pad_token_id=config.pad_id,
        eos_token_id=config.eos_id,
        decoder_start_token_id=config.bos_id,
        forced_eos_token_id=None,
        use_cache=False,
    )
    return MarianMTModel(marian)


def marian_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The encoder and decoder layers, the units torch.compile is applied to."""
    return [*model.model.encoder.layers, *model.model.decoder.layers]


def marian_train_step(
    model: torch.nn.Module,
    cfg: TrainConfig,
    device: torch.device,
    autocast: contextlib.AbstractContextManager[object],
) -> Callable[[Batch], None]:
    """A full training step as one usually trains an HF model, with the same Adam, loss and clipping as ours."""
    optimizer = build_optimizer(model, cfg)  # type: ignore[arg-type]  # any nn.Module; same fused/foreach choice
    pad = model.config.pad_token_id

    def step(batch: Batch) -> None:
        b = batch.to(device)
        optimizer.zero_grad(set_to_none=True)
        with autocast:
            logits = model(
                input_ids=b.src, attention_mask=b.src != pad, decoder_input_ids=b.tgt_in, use_cache=False
            ).logits  # (B, T, V)
        # Cross entropy over all positions, pads ignored, in float32 like ours.
        loss = F.cross_entropy(
            logits.float().flatten(0, 1),
            b.tgt_out.flatten(),
            ignore_index=pad,
            label_smoothing=cfg.label_smoothing,
            reduction="sum",
        )
        (loss / b.n_tgt_tokens).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip_norm or float("inf"))
        for group in optimizer.param_groups:
            group["lr"] = 1e-4
        optimizer.step()

    return step
