"""The worker's choice of the settings a job left to its time budget: recorded inputs, reproducible. The preset:
tests/worker/test_auto_preset.py."""

from __future__ import annotations

import json

import pytest

from app.schemas.jobs import ModelSpec, TrainingSpec
from model.data.demo import numbers_to_words_task
from model.probes.anatomy import estimate_memory
from model.train.budget import BudgetInputs, batch_lr_scale, choose_warmup, training_seconds
from model.train.compile_choice import COMPILE_SECONDS_PER_GRAPH, COMPILED_SPEEDUP, DATA_PARALLEL_GRAPHS
from model.train.step_graph import bucket_length
from tests.worker.auto_jobs import ALL, job_rows
from worker.training import auto_settings, throughput_probe
from worker.training.auto_settings import choose_settings, pending
from worker.training.job_data import JobRows, prepare_job


def test_same_corpus_budget_and_throughput_give_the_same_recorded_choice(corpus, worker_env):
    worker_env(WORKER_TOKENS_PER_SECOND="3000")
    first, second = job_rows(corpus, ALL), job_rows(corpus, ALL)
    data_1, data_2 = choose_settings(first, "cpu"), choose_settings(second, "cpu")
    auto = first.job.auto_settings
    assert auto == second.job.auto_settings
    assert data_1.tokenizer.fingerprint == data_2.tokenizer.fingerprint
    assert set(auto["chosen"]) == set(auto["reasons"]) == {*ALL, "lr_scale"}  # the rate follows the chosen batch
    batch = auto["chosen"]["max_tokens_per_batch"]
    assert first.job.training_config["lr_scale"] == auto["chosen"]["lr_scale"] == batch_lr_scale(batch) < 1
    assert auto["reasons"]["lr_scale"].startswith(f"{batch_lr_scale(batch):g}: updates of {batch:,} tokens, below")
    assert (auto["throughput"], auto["probe_seconds"]) == ("pinned", None)
    assert auto["inputs"]["tokens_per_second"] == 3000 and auto["inputs"]["training_pairs"] == len(corpus[0])
    assert auto["inputs"]["longest_example"] == max(e.size for e in data_1.train_examples)
    # The values are the job's settings now: a later attempt trains with them and chooses nothing.
    assert first.job.model_config["vocab_size"] == auto["chosen"]["vocab_size"] == 2000  # 900 pairs
    assert data_1.stats["vocab_size"] <= 2000
    for name in ("max_tokens_per_batch", "warmup_steps", "max_steps"):
        assert first.job.training_config[name] == auto["chosen"][name]
    assert pending(first) == []


def test_without_a_pinned_throughput_the_worker_measures_its_own(corpus, worker_env):
    worker_env(WORKER_TOKENS_PER_SECOND="0")
    rows = job_rows(corpus, ["max_tokens_per_batch", "warmup_steps"])
    choose_settings(rows, "cpu")
    auto = rows.job.auto_settings
    assert auto["throughput"] == "measured" and auto["probe_seconds"] > 0
    assert auto["inputs"]["tokens_per_second"] > 0
    assert set(auto["chosen"]) == {"max_tokens_per_batch", "warmup_steps", "lr_scale"}
    given = job_rows(corpus, ["max_tokens_per_batch"], lr_scale=1.0)  # a scale the job gives stays
    choose_settings(given, "cpu")
    assert given.job.training_config["lr_scale"] == 1.0 and "lr_scale" not in given.job.auto_settings["chosen"]
    assert rows.job.model_config["vocab_size"] == ModelSpec().vocab_size  # given (by default), not chosen
    assert rows.job.training_config["max_steps"] == TrainingSpec().max_steps


# A GPU's tokens/s, injected: a step costs a fixed 7.5 ms plus tokens at 200,000/s, so tokens/s at b is
# 200,000 x b / (b + 1,500): +21% a doubling from 2,048 to 8,192, +10% a doubling past it.
def _gpu_rate(tokens: int) -> float:
    return 200_000 * tokens / (tokens + 1_500)


@pytest.fixture
def fake_gpu(monkeypatch):
    """A CUDA device to auto_settings: its memory and its throughput at each batch size, without a GPU."""
    timed: list[tuple[str, int]] = []

    def measure(data, config, max_tokens, steps=3):
        timed.append((config.device, max_tokens))
        return _gpu_rate(max_tokens)

    monkeypatch.setattr(auto_settings, "measure_throughput", measure)  # the compile choice's timing
    monkeypatch.setattr(throughput_probe, "measure_throughput", measure)  # the budget's and the presets'
    monkeypatch.setattr(auto_settings, "memory_limit_bytes", lambda device: 80 * 1024**3)
    return timed


def test_a_gpu_worker_times_a_curve_and_chooses_at_least_its_knee(larger_corpus, worker_env, fake_gpu):
    worker_env(WORKER_TOKENS_PER_SECOND="0")
    rows = job_rows(larger_corpus, ["max_tokens_per_batch", "warmup_steps"])
    data = choose_settings(rows, "cuda")
    corpus_share = sum(e.size for e in data.train_examples) // 3 // 128 * 128  # the three timed batches an epoch
    assert 8192 < corpus_share < 32768  # the 16x probe is bounded by the corpus, not by the 80 GB
    assert fake_gpu == [("cuda", 2048), ("cuda", 8192), ("cuda", corpus_share)]
    auto = json.loads(json.dumps(rows.job.auto_settings))  # as the job's JSON column keeps it
    curve = [[size, round(_gpu_rate(size), 1)] for size in (2048, 8192, corpus_share)]
    assert auto["inputs"]["throughput_curve"] == curve
    assert auto["throughput"] == "measured" and auto["inputs"]["tokens_per_second"] == curve[0][1]
    # The square-root rule alone gives about 3,700 tokens at 2 minutes; the knee is 8,192.
    assert auto["chosen"]["max_tokens_per_batch"] == rows.job.training_config["max_tokens_per_batch"] == 8192
    assert auto["expected_updates"] == int(curve[1][1] * training_seconds(BudgetInputs(**auto["inputs"])) / 8192)
    assert "knee" in auto["reasons"]["max_tokens_per_batch"]
    assert auto["chosen"]["warmup_steps"] == choose_warmup(auto["expected_updates"], 8192)[0]


def test_a_gpu_curve_stays_within_the_gpu_memory(larger_corpus, worker_env, fake_gpu, monkeypatch):
    worker_env(WORKER_TOKENS_PER_SECOND="0")
    rows = job_rows(larger_corpus, ["max_tokens_per_batch"])
    config = prepare_job(job_rows(larger_corpus, [])).model_config
    limit = estimate_memory(config, 5120, precision="bf16")["training_total_bytes"]  # 5,120 tokens fit, no more
    monkeypatch.setattr(auto_settings, "memory_limit_bytes", lambda device: limit)
    choose_settings(rows, "cuda")
    assert fake_gpu == [("cuda", 2048), ("cuda", 5120)]
    assert rows.job.auto_settings["chosen"]["max_tokens_per_batch"] == 5120
    assert rows.job.auto_settings["inputs"]["max_batch_tokens"] == 5120


def test_a_cpu_worker_times_one_batch_size_unless_asked_for_a_curve(larger_corpus, worker_env, fake_gpu):
    worker_env(WORKER_TOKENS_PER_SECOND="0")
    rows = job_rows(larger_corpus, ["max_tokens_per_batch"])
    choose_settings(rows, "cpu")
    assert fake_gpu == [("cpu", 2048)]
    assert rows.job.auto_settings["inputs"]["throughput_curve"] == ()
    fake_gpu.clear()
    worker_env(WORKER_TOKENS_PER_SECOND="0", WORKER_THROUGHPUT_CURVE="always")
    choose_settings(rows := job_rows(larger_corpus, ["max_tokens_per_batch"]), "cpu")
    assert [size for _, size in fake_gpu][:2] == [2048, 8192]
    assert len(rows.job.auto_settings["inputs"]["throughput_curve"]) == 3


def test_a_pinned_throughput_is_used_on_a_gpu_too(larger_corpus, worker_env, fake_gpu):
    worker_env(WORKER_TOKENS_PER_SECOND="3000")
    rows = job_rows(larger_corpus, ["max_tokens_per_batch", "warmup_steps"])
    choose_settings(rows, "cuda")
    auto = rows.job.auto_settings
    assert fake_gpu == []  # nothing timed
    assert (auto["throughput"], auto["inputs"]["tokens_per_second"], auto["inputs"]["throughput_curve"]) == (
        "pinned",
        3000,
        (),
    )


def _buckets(data) -> int:
    return len({bucket_length(e.size) for e in data.train_examples})


def test_a_cpu_job_that_leaves_compile_out_runs_eager_and_says_why(corpus, worker_env, fake_gpu):
    """Pass: with no budget fields, the worker still decides compile (off on a CPU, nothing timed), records it
    beside the budget's choices with its reason, writes it into the job's settings, and has nothing left to choose."""
    rows = job_rows(corpus, [], compile=None)
    assert pending(rows) == ["compile"]
    choose_settings(rows, "cpu")
    auto = json.loads(json.dumps(rows.job.auto_settings))
    assert rows.job.training_config["compile"] is False
    assert (auto["fields"], auto["chosen"]) == (["compile"], {"compile": False})
    assert "CPU" in auto["reasons"]["compile"] and fake_gpu == []
    assert pending(rows) == []


def test_a_gpu_job_compiles_when_its_budget_wins_back_the_compile_time(larger_corpus, worker_env, fake_gpu):
    """Pass: the same corpus on a GPU compiles with 10 hours (saved time > graphs x compile seconds) and not with
    2 minutes; the record names the graphs (one per length bucket) and the training seconds it weighed."""
    worker_env(WORKER_TOKENS_PER_SECOND="3000")
    long = job_rows(larger_corpus, ["warmup_steps"], compile=None, max_minutes=600)
    data = choose_settings(long, "cuda")
    graphs = _buckets(data)
    assert long.job.training_config["compile"] is True and long.job.auto_settings["chosen"]["compile"] is True
    spec = long.job.training_config  # it stops at max_steps or at 10 hours, whichever comes first
    steps_seconds = spec["max_steps"] * spec["grad_accum_steps"] * spec["max_tokens_per_batch"] / 3000
    assert long.job.auto_settings["compile_inputs"] == {
        "graphs": graphs,
        "training_seconds": round(min(36000.0, steps_seconds), 1),
    }
    assert long.job.auto_settings["reasons"]["compile"].startswith("on:")
    short = job_rows(larger_corpus, ["warmup_steps"], compile=None)
    choose_settings(short, "cuda")
    assert 120 * (1 - 1 / COMPILED_SPEEDUP) < graphs * COMPILE_SECONDS_PER_GRAPH  # the case is a real "off"
    assert short.job.training_config["compile"] is False
    assert short.job.auto_settings["reasons"]["compile"].startswith("off:")
    assert set(short.job.auto_settings["chosen"]) == {"warmup_steps", "compile"}


def test_a_gpu_job_without_a_budget_is_weighed_by_its_steps_at_the_timed_pace(larger_corpus, worker_env, fake_gpu):
    """Pass: no max_minutes: the worker times the job's own batch once and weighs max_steps at that pace; many
    steps compile, few do not. Data-parallel jobs count DATA_PARALLEL_GRAPHS (compiled layers) whatever the lengths."""
    worker_env(WORKER_TOKENS_PER_SECOND="0")
    many = job_rows(larger_corpus, [], compile=None, max_minutes=None, max_steps=200_000, max_tokens_per_batch=4096)
    choose_settings(many, "cuda")
    assert fake_gpu == [("cuda", 4096)]
    seconds = 200_000 * 4096 / _gpu_rate(4096)
    assert many.job.auto_settings["compile_inputs"]["training_seconds"] == round(seconds, 1)
    assert many.job.training_config["compile"] is True
    few = job_rows(larger_corpus, [], compile=None, max_minutes=None, max_steps=50, max_tokens_per_batch=4096)
    choose_settings(few, "cuda")
    assert few.job.training_config["compile"] is False
    group = job_rows(larger_corpus, [], compile=None, max_minutes=None, max_steps=200_000, devices=2)
    choose_settings(group, "cuda")
    assert group.job.auto_settings["compile_inputs"]["graphs"] == DATA_PARALLEL_GRAPHS


def test_an_explicit_compile_is_never_chosen_again(corpus, worker_env, fake_gpu):
    """Pass: compile given (true on a CPU, false on a GPU with a long budget) is kept and nothing is recorded."""
    rows = job_rows(corpus, [], compile=True)
    assert pending(rows) == []
    worker_env(WORKER_TOKENS_PER_SECOND="3000")
    rows = job_rows(corpus, ["warmup_steps"], compile=False, max_minutes=600)
    choose_settings(rows, "cuda")
    assert rows.job.training_config["compile"] is False and "compile" not in rows.job.auto_settings["chosen"]


# tokens/s of each preset on a 2-core CPU, by d_model (tiny, small, base, big): model/train/size_choice.py's anchors
def test_a_mixed_jobs_vocabulary_is_chosen_from_its_distinct_rows(corpus, worker_env):
    """A mix repeats its new rows (model/data/mixing.py): 900 pairs 25 times look like 22,500, past the 20,000 that
    a vocabulary of 2,000 stops at; the rule must see the 900."""
    from model.data.mixing import Chain

    worker_env(WORKER_TOKENS_PER_SECOND="3000")
    rows = job_rows(corpus, ["vocab_size"])
    rows = JobRows(rows.job, Chain([rows.train_rows] * 25), rows.valid_rows)
    assert len(rows.train_rows) == 25 * len(corpus[0]) > 20_000
    choose_settings(rows, "cpu")
    auto = rows.job.auto_settings
    assert auto["chosen"]["vocab_size"] == 2000 and auto["inputs"]["training_pairs"] == len(corpus[0])


def test_a_vocabulary_shared_by_the_languages_of_several_pairs_grows_with_them(worker_env):
    """A job of en->de and en->fr: three languages share the vocabulary, so it is 3/2 of one pair's (3,000 for its
    fewer than 20,000 pairs), and the tokenizer holds it with a token a target."""
    from model.data.language_pairs import LanguagePair, multilingual_rows

    worker_env(WORKER_TOKENS_PER_SECOND="3000")
    pairs = [LanguagePair("en", "de"), LanguagePair("en", "fr")]
    by_pair = [numbers_to_words_task(600, seed=i, lang_tgt=p.target) for i, p in enumerate(pairs)]
    rows = multilingual_rows(by_pair, pairs)
    job = job_rows((rows, rows[:20]), ["vocab_size"]).job
    multi = JobRows(job, rows[20:], rows[:20], ("de", "fr"), languages=3)
    data = choose_settings(multi, "cpu")
    auto = multi.job.auto_settings
    assert auto["chosen"]["vocab_size"] == 3000 and auto["inputs"]["languages"] == 3
    assert "3 languages share it" in auto["reasons"]["vocab_size"]
    assert set(data.tokenizer.language_tokens) == {"de", "fr"}
