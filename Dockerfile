# syntax=docker/dockerfile:1
# Three images from one file:
#   docker build --target api -t transformer-service-api .      (FastAPI; no torch, small)
#   docker build --target worker -t transformer-service-worker . (Celery + PyTorch; CUDA wheels from PyPI)
#   docker build --target worker-gpu -t transformer-service-worker-gpu . (and cuBLAS 12 for CTranslate2 on a GPU)

FROM python:3.11-slim AS source
WORKDIR /srv
COPY pyproject.toml README.md alembic.ini ./
COPY app app
COPY worker worker
COPY model model
COPY migrations migrations

FROM python:3.11-slim AS runtime
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 DATA_DIR=/data
RUN useradd --uid 10001 --create-home service && mkdir -p /data /artifacts && chown service /data /artifacts
WORKDIR /srv

FROM runtime AS api
COPY --from=source /srv /srv
RUN pip install .
USER service
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s CMD python -c "import urllib.request as u; u.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"
CMD ["sh", "-c", "exec uvicorn app.main:app --host 0.0.0.0 --port ${PORT:-8000} --proxy-headers"]

FROM runtime AS worker
# The PyPI build of torch carries the CUDA runtime; the host's NVIDIA driver comes in through the
# container toolkit. Installed before the project so code changes do not re-download it.
RUN pip install torch==2.13.0
COPY --from=source /srv /srv
RUN pip install '.[worker]'
USER service
CMD ["celery", "-A", "worker.celery_app", "worker", "-Q", "training", "-c", "1", "--loglevel", "INFO"]

FROM worker AS worker-gpu
# cuBLAS for CUDA 12: the CTranslate2 wheel opens libcublas.so.12 at its first translation on a GPU, and a host
# with CUDA 13 alone has none (worker/serving/cuda_libs.py loads it from site-packages).
USER root
RUN pip install '.[worker,gpu]'
USER service
