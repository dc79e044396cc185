"""Spec of the user-facing inference functions: translate (n-best, alignments), token_log_probs and confidence,
fill_mask, capture_attention, embedding_neighbors, on tiny models trained on the demo tasks."""

from __future__ import annotations

import math

import pytest
import torch

from model.data.demo import grammar_cloze, grammar_sentences, reverse_task
from model.data.objectives import renoising
from model.data.special_tokens import SPECIAL_TOKENS
from model.data.tokenizer import Tokenizer
from model.decode import scoring
from model.decode.fill_mask import fill_mask
from model.decode.queries import capture_attention, embedding_neighbors, resolve_token, translate
from model.decode.scoring import confidence, token_log_probs
from model.nn.transformer import Transformer
from tests.model.decode.test_beam import (  # noqa: F401 (one_thread: autouse)
    ScriptedModel,
    one_thread,
    reverse_model,
    reverse_sources,
    train_tiny,
)


@pytest.fixture(scope="module")
def reverse() -> tuple[Transformer, Tokenizer]:
    return reverse_model()


@pytest.fixture(scope="module")
def grammar() -> tuple[Transformer, Tokenizer]:
    """Tiny denoising model, single-token masks, on the demo grammar (every answer is one token)."""
    sentences = grammar_sentences(3000, seed=0)
    tokenizer = Tokenizer.train(sentences, 450)
    noisy = renoising(tokenizer.encode_batch(sentences), seed=0, mode="token", mask_ratio=0.15)
    return train_tiny(noisy, tokenizer.vocab_size, steps=250), tokenizer


HELD_OUT = [s for s, _ in reverse_task(100, max_len=8, seed=99)]


# -- translate ------------------------------------------------------------------------------------------------


def test_translate_reverses_held_out_sentences_in_input_order(reverse):
    model, tokenizer = reverse
    results = translate(model, tokenizer, HELD_OUT, beam_size=4, batch_size=7)  # batches sorted by length
    assert len(results) == len(HELD_OUT)
    exact = sum(r["text"] == " ".join(reversed(s.split())) for r, s in zip(results, HELD_OUT)) / len(HELD_OUT)
    assert exact >= 0.9
    first = results[0]
    assert set(first) == {"text", "score", "log_prob", "confidence", "scored_tokens", "tokens"}
    assert tokenizer.decode([tokenizer.token_to_id(t) for t in first["tokens"]]) == first["text"]
    assert first["score"] >= first["log_prob"]  # the length penalty is >= 1


def test_translate_n_best_gives_sorted_distinct_alternatives(reverse):
    model, tokenizer = reverse
    results = translate(model, tokenizer, HELD_OUT[:5], beam_size=4, n_best=3)
    for r in results:
        assert len(r["alternatives"]) == 2
        scores = [r["score"]] + [a["score"] for a in r["alternatives"]]
        assert scores == sorted(scores, reverse=True)
        assert len({r["text"], *(a["text"] for a in r["alternatives"])}) == 3


def test_translate_refuses_a_bare_string_and_overlong_input(reverse):
    model, tokenizer = reverse
    with pytest.raises(ValueError, match="list of strings"):
        translate(model, tokenizer, "a b c")
    with pytest.raises(ValueError, match="max_positions=64"):
        translate(model, tokenizer, [" ".join(["a"] * 80)])
    assert translate(model, tokenizer, []) == []


@pytest.mark.parametrize("layer", [-1, "all"])
def test_alignments_point_at_the_mirrored_source_token(reverse, layer):
    model, tokenizer = reverse
    results = translate(model, tokenizer, HELD_OUT, return_alignment=True, alignment_layer=layer)
    hits = total = 0
    for r in results:
        n = len(r["source_tokens"])
        assert len(r["alignment"]) == len(r["tokens"])
        assert all(0 <= j < n for j in r["alignment"])
        hits += sum(j == n - 1 - i for i, j in enumerate(r["alignment"]))
        total += len(r["alignment"])
    assert hits / total >= 0.9, hits / total


def test_alignment_layer_out_of_range_is_refused(reverse):
    model, tokenizer = reverse
    with pytest.raises(ValueError, match="layer=5"):
        translate(model, tokenizer, ["a b"], return_alignment=True, alignment_layer=5)


# -- fill_mask ------------------------------------------------------------------------------------------------


def test_token_log_probs_add_up_to_each_hypothesis_log_prob_whatever_the_batch(reverse, monkeypatch):
    model, tokenizer = reverse
    sources = reverse_sources(tokenizer, 12)
    texts = [tokenizer.decode(s[:-1]) for s in sources]
    found = translate(model, tokenizer, texts, beam_size=4, n_best=3)
    hyps = [h for r in found for h in (r, *r["alternatives"])]
    srcs = [s for s in sources for _ in range(3)]
    targets = [[tokenizer.token_to_id(t) for t in h["tokens"]] for h in hyps]
    batched = token_log_probs(model, srcs, targets, batch_size=7)
    for hyp, scores, target in zip(hyps, batched, targets, strict=True):
        assert len(scores) == len(target) + 1 and all(s <= 0 for s in scores)
        assert sum(scores) == pytest.approx(hyp["log_prob"], abs=1e-4)
        assert hyp["confidence"] == pytest.approx(confidence(scores), abs=1e-4)  # the search's, without scoring
    one_by_one = [token_log_probs(model, [s], [t])[0] for s, t in zip(srcs[:6], targets[:6])]
    assert all(a == pytest.approx(b, abs=1e-5) for a, b in zip(one_by_one, batched[:6]))
    longest = max(len(t) for t in targets) + 1
    monkeypatch.setattr(scoring, "LOGITS_BUDGET", 3 * longest * model.config.vocab_size)  # 3 sentences a pass at most
    budgeted = token_log_probs(model, srcs, targets)
    assert all(a == pytest.approx(b, abs=1e-5) for a, b in zip(budgeted, batched))


def test_a_hypothesis_cut_at_the_length_limit_is_confident_over_its_tokens_alone(reverse):
    model, tokenizer = reverse
    texts = [tokenizer.decode(s[:-1]) for s in reverse_sources(tokenizer, 6)]
    for hyp in translate(model, tokenizer, texts, beam_size=4, max_len_a=0.0, max_len_b=2):  # 2 tokens: no </s>
        assert hyp["scored_tokens"] == len(hyp["tokens"]) == 2
        assert hyp["confidence"] == pytest.approx(math.exp(hyp["log_prob"] / 2))
    assert scoring.search_confidence(math.log(0.5) + math.log(0.125), 1, finished=True) == pytest.approx(0.25)
    with pytest.raises(ValueError, match="no log-probability"):
        scoring.search_confidence(0.0, 0, finished=False)


def test_a_right_translation_is_more_confident_than_a_wrong_one(reverse):
    model, tokenizer = reverse
    pairs = reverse_task(20, max_len=8, seed=5)
    sources = [tokenizer.encode(s) + [tokenizer.eos_id] for s, _ in pairs]
    right = [tokenizer.encode(t) for _, t in pairs]
    wrong = right[1:] + right[:1]  # each source given the next one's reversal
    sure = [confidence(lp) for lp in token_log_probs(model, sources, right)]
    unsure = [confidence(lp) for lp in token_log_probs(model, sources, wrong)]
    assert all(0 < c <= 1 for c in sure + unsure)
    assert sum(sure) / len(sure) > 0.8 and sum(unsure) / len(unsure) < 0.5, (sure, unsure)
    assert confidence([math.log(0.5), math.log(0.125)]) == pytest.approx(0.25)


def test_mismatched_lists_and_an_empty_score_are_refused(reverse):
    model, _ = reverse
    with pytest.raises(ValueError, match="2 sources for 1 targets"):
        token_log_probs(model, [[5, 2], [6, 2]], [[5]])
    with pytest.raises(ValueError, match="no token log-probabilities"):
        confidence([])


def test_fill_mask_top1_on_the_learned_grammar(grammar):
    model, tokenizer = grammar
    items = grammar_cloze(100, seed=7)
    correct = 0
    for text, answer in items:
        (candidates,) = fill_mask(model, tokenizer, text, top_k=5)
        assert len(candidates) == 5
        scores = [c["score"] for c in candidates]
        assert scores == sorted(scores, reverse=True)
        assert 0.0 < sum(scores) <= 1.0 + 1e-6
        correct += candidates[0]["token_str"] == answer
    assert correct / len(items) >= 0.8


def test_fill_mask_candidates_have_pipeline_fields_and_filled_sequences(grammar):
    model, tokenizer = grammar
    (candidates,) = fill_mask(model, tokenizer, "the big dog <mask> in the garden", top_k=3)
    best = candidates[0]
    assert set(best) == {"score", "token", "token_str", "sequence"}
    assert best["token_str"] == "barks"
    assert best["sequence"] == "the big dog barks in the garden"
    assert tokenizer.id_to_token(best["token"]) == "\u0120barks"
    (first,) = fill_mask(model, tokenizer, "<mask> big dogs bark in the garden", top_k=2)
    assert first[0]["sequence"].endswith(" big dogs bark in the garden")
    assert not first[0]["sequence"].startswith(" ")


def test_fill_mask_fills_every_mask_left_to_right(grammar):
    model, tokenizer = grammar
    results = fill_mask(model, tokenizer, "the small <mask> meows <mask> the river", top_k=2)
    assert len(results) == 2
    assert results[0][0]["token_str"] == "cat"
    assert results[0][0]["sequence"] == "the small cat meows <mask> the river"
    assert results[1][0]["token_str"] == "near"


def test_fill_mask_span_mode_scores_whole_spans(grammar):
    model, tokenizer = grammar
    (candidates,) = fill_mask(model, tokenizer, "the big dog <mask> in the garden", top_k=3, max_span_tokens=3)
    assert candidates[0]["token_str"] == "barks"
    assert all(isinstance(c["token"], list) and 1 <= len(c["token"]) <= 3 for c in candidates)
    assert sum(c["score"] for c in candidates) <= 1.0 + 1e-6
    (single,) = fill_mask(model, tokenizer, "the big dog <mask> in the garden", top_k=1)
    assert candidates[0]["score"] <= single[0]["score"] + 1e-6  # P(span, then "in") <= P(first token)


def test_fill_mask_span_beam_ranks_spans_by_the_probability_of_span_then_next_token():
    tokenizer = Tokenizer.train(["x y w z q"] * 20, 300)
    x, y, w, z, q = (tokenizer.token_to_id(t) for t in ("x", "\u0120y", "\u0120w", "\u0120z", "\u0120q"))
    # After "x": "y" (0.6) or "q" (0.4); the span ends when the decoder writes "z", the token after the mask.
    table = {(x,): {y: 0.6, q: 0.4}, (x, y): {z: 0.5, w: 0.5}, (x, y, w): {z: 1.0}, (x, q): {z: 0.9, w: 0.1}}
    model = ScriptedModel(table, vocab_size=tokenizer.vocab_size)
    (candidates,) = fill_mask(model, tokenizer, "x <mask> z", top_k=3, max_span_tokens=2)
    assert [c["token"] for c in candidates][:1] == [[q]]
    assert candidates[0]["score"] == pytest.approx(0.36) and candidates[0]["sequence"] == "x q z"
    assert {tuple(c["token"]) for c in candidates[1:]} == {(y,), (y, w)}
    assert [c["score"] for c in candidates[1:]] == pytest.approx([0.30, 0.30])
    assert sum(c["score"] for c in candidates) <= 1.0


def test_fill_mask_without_a_mask_is_refused(grammar):
    model, tokenizer = grammar
    with pytest.raises(ValueError, match="no <mask>"):
        fill_mask(model, tokenizer, "the big dog barks")


# -- capture_attention ----------------------------------------------------------------------------------------


def test_capture_attention_shapes_and_rows_that_sum_to_one(reverse):
    model, tokenizer = reverse
    out = capture_attention(model, tokenizer, "a b c d", target="d c b a")
    cfg = model.config
    S, T = len(out["source_tokens"]), len(out["target_tokens"])
    assert out["source_tokens"][-1] == "</s>" and out["target_tokens"][0] == "<s>"
    assert (S, T) == (5, 5)
    for name, n_layers, t_q, t_k in (
        ("encoder_self", cfg.n_encoder_layers, S, S),
        ("decoder_self", cfg.n_decoder_layers, T, T),
        ("cross", cfg.n_decoder_layers, T, S),
    ):
        w = torch.tensor(out[name])
        assert w.shape == (n_layers, cfg.n_heads, t_q, t_k), name
        assert torch.allclose(w.sum(-1), torch.ones(n_layers, cfg.n_heads, t_q), atol=1e-3), name
        flat = [x for layer in out[name] for head in layer for row in head for x in row]
        assert flat == [round(x, 4) for x in flat]  # compact: 4 decimals, as JSON will print them
    decoder_self = torch.tensor(out["decoder_self"])
    assert torch.all(decoder_self.triu(diagonal=1) == 0)  # causal: no position sees a later one


def test_capture_attention_uses_the_greedy_translation_without_a_target(reverse):
    model, tokenizer = reverse
    out = capture_attention(model, tokenizer, "a b c")
    assert out["target"] == "c b a"
    assert out["target_tokens"] == ["<s>", "c", "\u0120b", "\u0120a"]


# -- embedding_neighbors --------------------------------------------------------------------------------------


def test_embedding_neighbors_exclude_the_token_and_special_tokens(grammar):
    model, tokenizer = grammar
    neighbors = embedding_neighbors(model, tokenizer, "dog", k=10)
    assert len(neighbors) == 10
    names = [n["token"] for n in neighbors]
    assert "\u0120dog" not in names and not set(names) & set(SPECIAL_TOKENS)
    sims = [n["similarity"] for n in neighbors]
    assert sims == sorted(sims, reverse=True) and all(-1.0 <= s <= 1.0 for s in sims)
    assert embedding_neighbors(model, tokenizer, "\u0120dog", k=10) == neighbors


def test_tokens_resolve_with_or_without_the_space_marker(grammar):
    _, tokenizer = grammar
    assert resolve_token(tokenizer, "dogs") == tokenizer.token_to_id("\u0120dogs")
    assert resolve_token(tokenizer, "\u0120dogs") == tokenizer.token_to_id("\u0120dogs")
    assert resolve_token(tokenizer, 7) == 7
    assert resolve_token(tokenizer, "the") == tokenizer.token_to_id("the")  # an exact entry wins


def test_a_token_resolves_as_the_api_shows_it():
    from model.data.tokenizer import Tokenizer, byte_level_entry, readable_token

    tokenizer = Tokenizer.train(["für für über"] * 50, 300)
    assert [readable_token(tokenizer.id_to_token(i)) for i in tokenizer.encode(" für")] == ["\u2581für"]
    for entry in ("ĠfÃ¼r", "Ã"):
        shown = readable_token(entry)  # "▁für", "<0xC3>"
        assert byte_level_entry(shown) == entry
        assert resolve_token(tokenizer, shown) == tokenizer.token_to_id(entry)


def test_an_unknown_token_is_refused_by_name(grammar):
    model, tokenizer = grammar
    with pytest.raises(ValueError, match="'xylophone'"):
        embedding_neighbors(model, tokenizer, "xylophone")
