#!/usr/bin/env bash
# Every GPU figure in one command, on a GPU host, within 8 minutes (bench/gpu_suite.py says what it measures):
#   bash bench/gpu_suite.sh [bench/gpu_suite.py options, e.g. --only service-e2e --budget 300]
# Python: $PYTHON if set, else .venv/bin/python when its torch sees a GPU, else python3 (a GPU image's own).
# A host without a package registry: run bench/gpu_wheels.sh on a machine with one first; the wheels it leaves in
# .whl/ are installed here into /tmp/gpu-suite-site. The merged JSON goes to bench/results/; when $OUT names a
# folder, the JSON and the suite's log are copied there as well.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-}
if [ -z "$PY" ]; then
  if [ -x .venv/bin/python ] && .venv/bin/python -c 'import sys, torch; sys.exit(not torch.cuda.is_available())' 2>/dev/null; then
    PY=.venv/bin/python
  else
    PY=python3
  fi
fi
wheels=${GPU_SUITE_WHEELS:-.whl}
if compgen -G "$wheels/*.whl" > /dev/null; then
  if $PY -m pip install --quiet --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/gpu-suite-site "$wheels"/*.whl; then
    export PYTHONPATH=/tmp/gpu-suite-site${PYTHONPATH:+:$PYTHONPATH}
    for tree in "$wheels"/*.tar.xz; do  # packages carried as installed files (bench/gpu_wheels.sh)
      [ -e "$tree" ] && tar -C /tmp/gpu-suite-site -xJf "$tree"
    done
  else
    echo "the wheels in $wheels do not install on $($PY --version); going on without them" >&2
  fi
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
# The service's processes (bench/service_e2e.py) find their interpreter as sys.executable: nothing else to set.
log=$(mktemp /tmp/gpu-suite-XXXX.log)
$PY bench/gpu_suite.py "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
if [ -n "${OUT:-}" ] && [ -d "$OUT" ]; then
  cp "$log" "$OUT/gpu_suite.log"
  out=$(sed -n 's/^written to //p' "$log" | tail -1)
  [ -n "$out" ] && cp "$out" "$OUT/"
fi
exit "$rc"
