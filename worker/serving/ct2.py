"""CTranslate2 as an optional decoding backend: the same model, exported and converted once per host.

Our PyTorch beam search is the reference; CTranslate2 runs the same weights with faster kernels (2-4x on a
CPU in bench/decode_throughput.py). Differences: its length penalty is len^alpha rather than GNMT's
((5 + len) / 6)^alpha, so near-ties can rank differently; int8, the default on Intel CPUs with VNNI
(worker/serving/ct2_device.py), trades a little accuracy for speed (float32 is the default on AMD CPUs, where int8
is exact only with Intel MKL's int8 GEMM, see `prefer_exact_int8_gemm`, and on CPUs without VNNI, where it
saturates, see `cpu_int8_exact`).
"""

from __future__ import annotations

import json
import logging
import os
import platform
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch

from app.core.settings import get_settings
from model.decode.batches import CPU_BATCH_SENTENCES, GPU_BATCH_SENTENCES
from model.decode.beam import max_target_len
from model.decode.greedy import never_emitted
from model.decode.queries import align
from model.decode.sampling import Sampling
from model.decode.scoring import search_confidence
from model.io.export import convert_to_ctranslate2, export_marian
from worker.device import worker_device
from worker.serving.ct2_device import Ct2Placement, place
from worker.serving.cuda_libs import preload_cublas_once
from worker.serving.model_cache import LoadedModel

log = logging.getLogger(__name__)


def prefer_exact_int8_gemm() -> None:
    """On AMD CPUs, let CTranslate2 multiply int8 matrices with Intel MKL (CT2_USE_MKL=1) unless the operator chose.

    Its default there, oneDNN's u8s8 GEMM on AVX2, saturates 16-bit intermediate sums: on our reverse-task test
    model int8 decoding fell to 0.75 exact match against 0.975 in float32, and with MKL it matches float32
    exactly. Must run before ctranslate2 is first imported (the library reads the variable when it loads)."""
    if "CT2_USE_MKL" not in os.environ and amd_cpu():
        os.environ["CT2_USE_MKL"] = "1"


def _x86_cpuinfo() -> str | None:
    """/proc/cpuinfo on an x86-64 host; None elsewhere or where it cannot be read."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return None
    try:
        return Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return None


def amd_cpu() -> bool:
    """Whether this host's CPU is an x86-64 AMD one (from /proc/cpuinfo; False where that cannot be read)."""
    return "AuthenticAMD" in (_x86_cpuinfo() or "")


# The CPU flags of an int8 dot product that sums in 32 bits (AVX512-VNNI since Cascade Lake, AVX-VNNI since Alder
# Lake, AMX since Sapphire Rapids).
VNNI_FLAGS = frozenset({"avx512_vnni", "avx_vnni", "amx_int8"})


def cpu_int8_exact() -> bool:
    """Whether CTranslate2's int8 matrix products are exact enough to serve on this host's CPU.

    An x86-64 CPU without VNNI multiplies u8 by s8 with vpmaddubsw, whose 16-bit pair sums saturate: on an Intel
    Xeon with AVX-512 but no VNNI (Skylake) greedy int8 decoding of our test model matched float32 on 0.825 of the
    sentences (with MKL's GEMM or oneDNN's alike), and a served model answered split texts with garbage. True off
    x86-64 (ARM's int8 kernels sum in 32 bits) and where the flags cannot be read."""
    info = _x86_cpuinfo()
    if info is None:
        return True
    flags = next((line.split(":", 1)[1].split() for line in info.splitlines() if line.startswith("flags")), None)
    return flags is None or not VNNI_FLAGS.isdisjoint(flags)


prefer_exact_int8_gemm()


def available() -> bool:
    try:
        import ctranslate2  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        return False
    return True


# Bumped when the export or the conversion changes what they write: conversions cached before are made again.
CONVERSION = 1
STAMP = "converted.json"  # what a cached conversion was made from and by; it is reused only while that still holds


def conversion_dir(loaded: LoadedModel) -> Path:
    """<DATA_DIR>/ctranslate2/<model id>-<sha256 prefix>: where the model's conversion is cached on this host."""
    return get_settings().data_dir.resolve() / "ctranslate2" / f"{loaded.model_id}-{loaded.meta['sha256'][:12]}"


def _stamp(loaded: LoadedModel) -> dict[str, Any]:
    import ctranslate2

    return {"sha256": loaded.meta["sha256"], "ctranslate2": ctranslate2.__version__, "conversion": CONVERSION}


def cached(target: Path, loaded: LoadedModel) -> bool:
    """Whether `target` holds a whole conversion of these weights by this CTranslate2 and this conversion code."""
    try:
        stamp = json.loads((target / STAMP).read_text())
    except (OSError, ValueError):
        return False
    return stamp == _stamp(loaded) and (target / "model.bin").is_file()


def _converted_dir(loaded: LoadedModel) -> Path:
    """The model converted to CTranslate2: cached (see `cached`) or converted now. The conversion is written in a
    temporary folder and renamed into place, so a crash leaves no half-written model; a stale one (other weights,
    another CTranslate2, an older conversion) is replaced. Of two processes converting at once, the first rename
    wins and the other uses it."""
    target = conversion_dir(loaded)
    if cached(target, loaded):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        marian = export_marian(loaded.model, loaded.tokenizer, Path(tmp) / "marian")
        converted = convert_to_ctranslate2(marian, Path(tmp) / "ct2")
        (converted / STAMP).write_text(json.dumps(_stamp(loaded)))
        if cached(target, loaded):
            return target  # another worker process converted it meanwhile
        shutil.rmtree(target, ignore_errors=True)
        try:
            converted.rename(target)
        except OSError:
            if not cached(target, loaded):
                raise
    log.info("converted model %s to CTranslate2 in %s", loaded.model_id, target)
    return target


PROBE_SOURCE = ["</s>"] * 8  # any tokens: the length is what makes CTranslate2 call cuBLAS


class CT2Translator:
    def __init__(self, loaded: LoadedModel) -> None:
        import ctranslate2

        self.loaded = loaded
        reused = cached(conversion_dir(loaded), loaded)
        path = _converted_dir(loaded)
        try:
            self._open(ctranslate2, path)
        except Exception as exc:
            if not reused:
                raise
            # A cached conversion that no longer loads (a disk fault, a file changed by hand): made again, once.
            log.warning(
                "model %s: the CTranslate2 conversion cached in %s did not load (%s: %s); converting it again",
                loaded.model_id, path, type(exc).__name__, exc,
            )  # fmt: skip
            shutil.rmtree(path, ignore_errors=True)
            self._open(ctranslate2, _converted_dir(loaded))
        if self.placement.fallback:
            log.warning("model %s on CTranslate2: %s", loaded.model_id, self.placement.fallback)
        # On a GPU worker, why CTranslate2 serves this model from the CPU instead (translation.py then leaves `auto`
        # to PyTorch on the GPU); None where it is on the worker's own device.
        on_gpu_worker = worker_device().type == "cuda"
        self.off_gpu = self.placement.fallback if on_gpu_worker and self.placement.device == "cpu" else None
        log.info(
            "model %s on CTranslate2 %s:%d in %s",
            loaded.model_id,
            self.placement.device,
            self.placement.device_index,
            self.placement.compute_type,
        )

    def _open(self, ctranslate2: Any, path: Path) -> None:
        """Load the converted model on the worker's GPU where CTranslate2 can translate there (cuBLAS 12 preloaded,
        then probed), else on the CPU with the reason in placement.fallback."""
        settings = get_settings()
        self.placement = place(
            worker_device(),
            settings.ct2_compute_type,
            ctranslate2.get_cuda_device_count,
            ctranslate2.get_supported_compute_types,
            amd_cpu=amd_cpu(),
            int8_exact=cpu_int8_exact(),
        )
        threads = settings.torch_threads or torch.get_num_threads()
        what = "loading"
        try:
            if self.placement.device == "cuda":
                preload_cublas_once()  # before CTranslate2's first matrix product on the GPU opens libcublas.so.12
            self.translator = self._load(ctranslate2, str(path), self.placement, threads)
            if self.placement.device == "cuda":
                what = "translating"
                self._probe(self.translator)
        except Exception as exc:  # noqa: BLE001  # e.g. the GPU is out of memory: the CPU can still serve
            if self.placement.device == "cpu":
                raise
            why = f"{what} on cuda:{self.placement.device_index} failed: {type(exc).__name__}: {exc}"
            on_cpu = place(
                torch.device("cpu"),
                settings.ct2_compute_type,
                lambda: 0,
                ctranslate2.get_supported_compute_types,
                amd_cpu=amd_cpu(),
                int8_exact=cpu_int8_exact(),
            )
            self.placement = Ct2Placement("cpu", 0, on_cpu.compute_type, f"{why}; serving on the CPU")
            self.translator = self._load(ctranslate2, str(path), self.placement, threads)

    @staticmethod
    def _probe(translator: Any) -> None:
        """Translate an 8-token source by one step. CTranslate2 loads cuBLAS at the first matrix product, not
        when it counts GPUs or loads a model: on an H200 host with CUDA 13 alone, the CUDA 12 wheel reported one
        GPU and float16, loaded the model, and then failed every translation with "Library libcublas.so.12 is not
        found or cannot be loaded". A one-token source translated there without error (float16 and float32, beam
        1 and 4); five tokens failed. Probing at load time moves such a host to the CPU once, instead of a 503
        for every request."""
        translator.translate_batch([PROBE_SOURCE], beam_size=1, max_decoding_length=1)

    @staticmethod
    def _load(ctranslate2: Any, path: str, placement: Ct2Placement, threads: int) -> Any:
        return ctranslate2.Translator(
            path,
            device=placement.device,
            device_index=placement.device_index,
            compute_type=placement.compute_type,
            intra_threads=threads,
            inter_threads=1,
        )

    def translate(
        self,
        texts: list[str],
        beam_size: int,
        n_best: int,
        max_length: int | None,
        return_alignment: bool,
        alpha: float = 0.6,
        sampling: Sampling | None = None,
    ) -> list[dict[str, Any]]:
        """The same result dicts as model.decode.queries.translate; alpha is CTranslate2's length penalty exponent
        (len^alpha, where ours is GNMT's ((5 + len) / 6)^alpha). With `sampling`, one translation each drawn token
        by token (beam 1, CTranslate2's sampling_topk and sampling_temperature). Its seed is not used: CTranslate2
        draws from a generator each of its threads seeds once, at its start, so its draws never repeat (measured:
        two calls with ctranslate2.set_random_seed(2) first drew different translations)."""
        tokenizer, config = self.loaded.tokenizer, self.loaded.model.config
        sources = [tokenizer.encode(t) + [tokenizer.eos_id] for t in texts]
        longest = max(len(s) for s in sources)
        limit = max_length or max_target_len(longest, 2.0, 10, config.max_positions)
        search: dict[str, Any] = {"beam_size": beam_size, "num_hypotheses": n_best}
        if sampling is not None:
            search = {"beam_size": 1, "num_hypotheses": 1, "sampling_topk": sampling.top_k,
                      "sampling_temperature": sampling.temperature}  # fmt: skip
        results = self.translator.translate_batch(
            [[tokenizer.id_to_token(i) for i in s] for s in sources],
            **search,
            length_penalty=alpha,
            max_decoding_length=limit,
            return_scores=True,
            suppress_sequences=[[tokenizer.id_to_token(i)] for i in never_emitted(config)],  # as our decoders
            # sorted by length and cut into batches of this many, as our decoder does (worker/serving/decode_limits.py)
            max_batch_size=GPU_BATCH_SENTENCES if self.placement.device == "cuda" else CPU_BATCH_SENTENCES,
        )
        out = []
        for source, result in zip(sources, results):
            hyps = [
                ([tokenizer.token_to_id(t) for t in tokens], score)
                for tokens, score in zip(result.hypotheses, result.scores)
            ]
            best = self._hypothesis(*hyps[0], alpha, limit)
            if n_best > 1:
                best["alternatives"] = [self._hypothesis(*h, alpha, limit) for h in hyps[1:]]
            if return_alignment:
                best["source_tokens"] = [tokenizer.id_to_token(t) for t in source[:-1]]
                best["alignment"] = align(self.loaded.model, source, hyps[0][0])
            out.append(best)
        return out

    def token_log_probs(self, sources: list[list[int]], targets: list[list[int]]) -> list[list[float]]:
        """The log-probability of each target token and of </s> under this translator (CTranslate2's score_batch:
        teacher forcing, as model.decode.scoring does for PyTorch). sources end with </s>; targets have neither
        <s> nor </s>."""
        tokenizer = self.loaded.tokenizer
        results = self.translator.score_batch(
            [[tokenizer.id_to_token(i) for i in s] for s in sources],
            [[tokenizer.id_to_token(i) for i in t] for t in targets],
            max_batch_size=GPU_BATCH_SENTENCES if self.placement.device == "cuda" else CPU_BATCH_SENTENCES,
        )
        return [list(r.log_probs) for r in results]

    def _hypothesis(self, ids: list[int], score: float, alpha: float, limit: int) -> dict[str, Any]:
        """The result dict of one hypothesis. CTranslate2's score is log_prob / length^alpha, the length counting
        </s> where the hypothesis ended with it; one that fills max_decoding_length was cut without it (measured
        against score_batch on a trained model: these lengths match to 4 decimals, the others do not)."""
        tokenizer = self.loaded.tokenizer
        finished = len(ids) < limit
        scored = len(ids) + int(finished)
        log_prob = score * scored**alpha  # scored >= 1: limit >= 1
        return {
            "text": tokenizer.decode(ids),
            "score": score,
            "log_prob": log_prob,
            "confidence": search_confidence(log_prob, len(ids), finished),
            "scored_tokens": scored,
            "tokens": [tokenizer.id_to_token(t) for t in ids],
        }
