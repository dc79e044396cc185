"""Names and queues of the worker's tasks. The API sends by name and never imports worker/."""

from __future__ import annotations

TRAINING_QUEUE = "training"
INFERENCE_QUEUE = "inference"
# A job's training.accelerator -> the queue its task goes to. Every training worker consumes "training"; a GPU
# worker also "training.gpu" and a CPU worker "training.cpu" (worker/celery_app.py adds it from its device).
ACCELERATOR_QUEUES = {"any": TRAINING_QUEUE, "gpu": "training.gpu", "cpu": "training.cpu"}
# A multi-host job's further nodes: the worker that claimed it sends N-1 join tasks to the queue of its own device
# kind, which every training worker of that kind consumes (worker/celery_app.py), so the hosts match.
NODE_QUEUES = {"gpu": "training.nodes.gpu", "cpu": "training.nodes.cpu"}
# Datasets' parsing, reports and filtering, and webhook deliveries: short of a worker of their own (`-Q data` or
# `-Q webhooks`), every inference worker takes them too (worker/celery_app.py).
DATA_QUEUE = "data"
WEBHOOK_QUEUE = "webhooks"
QUEUES = (
    TRAINING_QUEUE,
    ACCELERATOR_QUEUES["gpu"],
    ACCELERATOR_QUEUES["cpu"],
    NODE_QUEUES["gpu"],
    NODE_QUEUES["cpu"],
    INFERENCE_QUEUE,
    DATA_QUEUE,
    WEBHOOK_QUEUE,
)

PING = "service.ping"
TRAIN = "service.train"
JOIN_TRAINING = "service.join_training"
TRANSLATE = "service.translate"
FILL_MASK = "service.fill_mask"
ATTENTION = "service.attention"
NEIGHBORS = "service.neighbors"
GEOMETRY = "service.geometry"
# Tasks an HTTP request waits for, each decoding with a model: many a second on a busy inference worker.
REQUEST_TASKS = frozenset({TRANSLATE, FILL_MASK, ATTENTION, NEIGHBORS, GEOMETRY})
EXPORT = "service.export"
EVALUATE = "service.evaluate"
IMPORT = "service.import"
TRANSLATE_FILE = "service.translate_file"
TRANSLATE_DATASET = "service.translate_dataset"
PROCESS_DATASET = "service.process_dataset"
FILTER_DATASET = "service.filter_dataset"
DELIVER_WEBHOOK = "service.deliver_webhook"
COLLECT_ARTIFACTS = "service.collect_artifacts"
