#!/usr/bin/env bash
# Wheels of what bench/gpu_suite.sh needs and a GPU host's image lacks, downloaded into .whl/ on a machine with a
# package registry (a GPU host without a network installs them from there):
#   bash bench/gpu_wheels.sh            # Python 3.12, manylinux x86_64, the versions pyproject.toml pins
# The API's dependencies and the worker's CTranslate2, num2words and sentencex, with what they pull in, less the
# packages the image already holds (IMAGE_HAS: PyTorch, numpy, transformers, tokenizers, httpx, ...); and, without
# their dependencies (OpusFilter's pull in lingua, over 100 MB, which the data report never imports), OpusFilter and
# py3langid with the three small packages of theirs the data report and the filters do import (NO_DEPS), pandas,
# regex and xxhash being in the image. The host lacks boto3, psycopg and translate-toolkit (S3, PostgreSQL, TBX glossaries): the service imports each
# only where it is used, and starts without them (tests/test_optional_imports.py). A device run carries at most
# 64 MiB, the repository's files included: the script fails past that. nvidia-cublas-cu12 (581 MB), which
# CTranslate2's float16 needs on a CUDA 13 host, does not fit: on such a host CTranslate2 runs on the CPU and the
# suite says so (docs/gpu.md).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
PYVER=${GPU_PYTHON_VERSION:-3.12}
IMAGE_HAS='torch numpy transformers tokenizers huggingface_hub safetensors sacrebleu sentencepiece protobuf httpx
httpcore h11 anyio idna certifi sniffio click rich markdown_it_py mdurl pygments pyyaml regex requests urllib3
charset_normalizer typing_extensions packaging filelock fsspec tqdm prometheus_client uvloop psutil six
python_dateutil portalocker tabulate colorama lxml wrapt jinja2 markupsafe pandas xxhash'
NO_DEPS='iso639-lang==2.6.3 ruamel.yaml==0.19.1'  # what OpusFilter's hasher and filters import, beside the image's
pins=$($PY - <<'PY'
import re, tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
keep = ("ctranslate2", "num2words", "sentencex")
no_deps = ("opusfilter", "py3langid")
worker = [r for r in project["optional-dependencies"]["worker"] if r.split("==")[0] in keep]
skip = ("psycopg", "boto3", "translate-toolkit")  # PostgreSQL, S3, TBX glossaries: imported where used
print(" ".join(r for r in project["dependencies"] + worker if not r.startswith(skip)))
print(" ".join(r for r in project["optional-dependencies"]["worker"] if r.split("==")[0] in no_deps))
PY
)
no_deps_pins="$(echo "$pins" | sed -n 2p) $NO_DEPS"
pins=$(echo "$pins" | sed -n 1p)
rm -rf .whl && mkdir -p .whl
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
platforms=""
for n in 17 24 27 28 31 34; do platforms="$platforms --platform manylinux_2_${n}_x86_64"; done
# docopt (num2words needs it) is published as source only: built here into a pure-Python wheel first.
$PY -m pip wheel --quiet --no-deps -w .whl docopt==0.6.2 2>&1 | grep -v '^WARNING: Location' || true
# shellcheck disable=SC2086  # word splitting of the lists is wanted
$PY -m pip download --quiet --only-binary=:all: --python-version "$PYVER" --implementation cp --find-links .whl \
  $platforms --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any -d .whl $pins \
  2> >(grep -v '^WARNING: Location' >&2)
$PY -m pip download --quiet --no-deps --only-binary=:all: --python-version "$PYVER" --implementation cp \
  $platforms --platform manylinux2014_x86_64 --platform any -d .whl $no_deps_pins 2> >(grep -v '^WARNING: Location' >&2)
for name in $IMAGE_HAS; do
  rm -f .whl/"$name"-[0-9]*.whl .whl/"$(echo "$name" | tr _ -)"-[0-9]*.whl
done
# CTranslate2's wheel (43 MB, deflated) travels as its installed files in an xz tarball (25 MB), which
# bench/gpu_suite.sh unpacks beside the wheels it installs: room for the rest under the 64 MiB.
for whl in .whl/ctranslate2-*.whl; do
  [ -e "$whl" ] || continue
  tree=$(mktemp -d)
  unzip -q "$whl" -d "$tree" && tar -C "$tree" -cf - . | xz -T0 -9 > .whl/ctranslate2.tar.xz
  rm -rf "$tree" "$whl"
done
ls .whl
du -sh .whl
# A device run carries the wheels with the repository's files: 64 MiB in all.
size=$(( $(du -sb .whl | cut -f1) + $(git ls-files -z | du -cb --files0-from=- | tail -1 | cut -f1) ))
if [ "$size" -gt $((64 * 1024 * 1024)) ]; then
  echo "the wheels and the repository take $((size / 1024 / 1024)) MiB, over the 64 MiB a device run carries" >&2
  exit 1
fi
