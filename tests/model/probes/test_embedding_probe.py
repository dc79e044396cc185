"""Embeddings over training: the 2-D map of the most frequent tokens and the neighbours of the watched ones."""

from __future__ import annotations

import pytest
import torch

from model.data.batching import Example
from model.data.demo import reverse_task
from model.data.tokenizer import readable_token
from model.nn.config import ModelConfig
from model.nn.transformer import Transformer
from model.probes.embeddings import EmbeddingProbe, frequent_ids
from model.train.config import TrainConfig
from model.train.events import Callbacks
from model.train.loop import train
from model.train.prepare import prepare
from model.train.settings import MAX_KEEP_CHECKPOINTS, DataSettings


@pytest.fixture(scope="module")
def data():
    return prepare("translation", reverse_task(200, vocab=12, min_len=2, max_len=8, seed=0), preset="tiny",
                   vocab_size=300, settings=DataSettings(max_length=16), seed=0)  # fmt: skip


def test_frequent_ids_rank_by_count_without_specials(data):
    examples = [Example([7, 7, 9, 1], [9, 7]), Example([8], [9, 2])]
    assert frequent_ids(examples, 3, False, data.tokenizer) == [7, 9, 8]  # 3 x 7, 3 x 9 (tie: by id), 1 x 8


def test_watched_words_leave_out_tokens_that_hold_only_part_of_a_character():
    from model.data.tokenizer import Tokenizer

    tokenizer = Tokenizer.train(["für für für über"] * 50, 300)
    half = tokenizer.token_to_id("Ã")  # the first byte of "ü": readable as "<0xC3>", no letters
    word = tokenizer.encode(" für")[0]
    assert readable_token("Ã") == "<0xC3>" and len(tokenizer.encode(" für")) == 1
    examples = [Example([half] * 5 + [word], [half])]
    assert frequent_ids(examples, 2, False, tokenizer) == [half, word]
    assert frequent_ids(examples, 2, True, tokenizer) == [word]


def test_neighbours_and_a_map_that_turns_with_the_embeddings_but_not_with_their_axes(data):
    torch.manual_seed(0)
    model = Transformer(ModelConfig.from_preset("tiny", data.tokenizer.vocab_size))
    examples = data.train_examples
    probe = EmbeddingProbe(data.tokenizer, examples)
    assert probe.watched == probe.cloud[:8]  # the toy corpus has no words of two letters: its most frequent tokens
    a, b = probe.cloud[:2]
    with torch.no_grad():
        model.encoder.embed_tokens.weight[b] = 3 * model.encoder.embed_tokens.weight[a]  # same direction as a
    first = probe.record(model, step=100)
    name_a, name_b = probe._name(a), probe._name(b)
    assert first.neighbors[name_a][0] == [name_b, 1.0]
    assert len(first.points) == len(first.tokens) == len(probe.cloud) and len(first.points[0]) == 2
    assert first.explained[0] >= first.explained[1] > 0 and sum(first.explained) <= 1 + 1e-6
    # an orthogonal change of the whole matrix keeps every distance: the map, rotated back, stays where it was
    q, _ = torch.linalg.qr(torch.randn(model.config.d_model, model.config.d_model))
    with torch.no_grad():
        model.encoder.embed_tokens.weight.copy_(model.encoder.embed_tokens.weight @ q)
    second = probe.record(model, step=200)
    torch.testing.assert_close(torch.tensor(second.points), torch.tensor(first.points), atol=1e-3, rtol=1e-3)
    assert second.to_json()["groups"][0] == [first.tokens[0], probe.cloud[0], None]


def test_training_records_embeddings_at_each_checkpoint_with_chosen_tokens(data, tmp_path):
    token = data.tokenizer.id_to_token(frequent_ids(data.train_examples, 1, False, data.tokenizer)[0])
    config = TrainConfig(
        max_steps=8, max_tokens_per_batch=256, warmup_steps=4, peak_lr=1e-3, eval_every=1000, checkpoint_every=4,
        eval_max_sentences=4, keep_checkpoints=MAX_KEEP_CHECKPOINTS, dynamics_every=100,
        probe_tokens=[token, "no-such-token-xyz"], seed=0, eval_budget=None,
    )  # fmt: skip
    records = []
    train(data, config, tmp_path, callbacks=Callbacks(on_dynamics=records.append))
    embeddings = [r for r in records if r.kind == "embeddings"]
    assert [r.step for r in embeddings] == [4, 8]
    assert list(embeddings[0].neighbors) == [readable_token(token)]  # the unknown token is left out (and logged)
    assert embeddings[0].points != embeddings[1].points  # training moved them
