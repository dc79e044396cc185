"""Rows kept on disk (model/data/text_rows.py): read back exactly, and prepared into exactly the data a list gives."""

import os

import numpy as np
import pytest

from model.data import objectives
from model.data.demo import grammar_sentences, reverse_task
from model.data.text_rows import Subset, TextRows
from model.train.prepare import prepare, split_validation
from model.train.settings import DataSettings

PAIRS = [("héllo wörld", "bonjour ✓"), ("a\tb", "c"), ("", "only a target"), ("中文", "日本語 " * 50)]


@pytest.mark.parametrize("make", ["write", "of"])
def test_pairs_read_back_exactly(tmp_path, make):
    rows = TextRows.write(PAIRS, 2, tmp_path) if make == "write" else TextRows.of(PAIRS, 2)
    assert len(rows) == len(PAIRS)
    assert [rows[i] for i in range(len(rows))] == PAIRS
    assert list(rows) == PAIRS and rows[1:3] == PAIRS[1:3] and rows[::-1] == PAIRS[::-1]
    assert rows[-1] == PAIRS[-1]
    assert rows.nbytes == sum(len(s.encode()) for pair in PAIRS for s in pair)
    with pytest.raises(IndexError, match="row 4 of 4"):
        rows[4]


def test_sentences_and_no_rows(tmp_path):
    sentences = ["one", "", "three ✓"]
    assert list(TextRows.write(sentences, 1, tmp_path)) == sentences
    empty = TextRows.write([], 2, tmp_path)
    assert len(empty) == 0 and list(empty) == [] and not empty


def test_the_file_is_gone_from_its_folder_at_once_and_closes(tmp_path):
    rows = TextRows.write(PAIRS, 2, tmp_path)
    assert os.listdir(tmp_path) == []  # unlinked: a crash leaves nothing behind
    assert rows[0] == PAIRS[0]
    rows.close()
    with pytest.raises(ValueError, match="closed"):
        rows[0]


def test_a_row_of_the_wrong_width_is_refused_naming_it(tmp_path):
    with pytest.raises(ValueError, match="row 1 has 1 sides, expected 2"):
        TextRows.write([("a", "b"), "c"], 2, tmp_path)
    with pytest.raises(ValueError, match="width=3"):
        TextRows.of([], 3)


def test_reading_more_rows_than_a_chunk_keeps_their_order(tmp_path, monkeypatch):
    monkeypatch.setattr("model.data.text_rows.READ_CHUNK", 3)
    pairs = [(f"s{i}", f"t{i}") for i in range(10)]
    rows = TextRows.write(pairs, 2, tmp_path)
    assert list(rows) == pairs
    for indices in ([9, 0, 4, 5, 6], [0, 2, 3, 5, 9], [1, 8]):  # out of order; close together (one read); far apart
        view = Subset(rows, np.array(indices))
        assert list(view) == [pairs[i] for i in indices] and view[1] == pairs[indices[1]] and len(view) == len(indices)


def test_the_validation_split_of_rows_on_disk_is_the_lists(tmp_path):
    pairs = [(f"s{i}", f"t{i}") for i in range(100)]
    train, valid = split_validation(TextRows.write(pairs, 2, tmp_path), 0.1, 1000, seed=3)
    list_train, list_valid = split_validation(pairs, 0.1, 1000, seed=3)
    assert isinstance(train, Subset) and list(train) == list_train and valid == list_valid


@pytest.mark.parametrize("objective", ["translation", "denoising"])
def test_prepare_on_rows_on_disk_gives_exactly_the_data_of_a_list(tmp_path, monkeypatch, objective):
    monkeypatch.setattr(objectives, "ENCODE_ROWS", 7)  # many chunks
    if objective == "translation":
        rows, width, settings = reverse_task(300, vocab=12, min_len=2, max_len=8, seed=0), 2, DataSettings(max_length=6)
    else:
        rows, width = grammar_sentences(200, seed=0), 1
        settings = DataSettings(max_length=20, noise="span", mask_ratio=0.3)
    kwargs = {"preset": "tiny", "vocab_size": 300, "settings": settings, "seed": 1}
    ours = prepare(objective, TextRows.write(rows, width, tmp_path), **kwargs)
    theirs = prepare(objective, list(rows), **kwargs)
    assert ours.tokenizer.fingerprint == theirs.tokenizer.fingerprint
    assert ours.stats == theirs.stats and ours.stats["dropped"] > 0  # some rows longer than max_length
    assert ours.valid_examples == theirs.valid_examples
    train, their_train = ours.train_examples, theirs.train_examples
    if callable(train):
        assert callable(their_train) and list(train(2)) == list(their_train(2))
    else:
        assert list(train) == list(their_train)
