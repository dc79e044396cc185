"""Names and queues of the worker's tasks. The API sends by name and never imports worker/."""

from __future__ import annotations

TRAINING_QUEUE = "training"
INFERENCE_QUEUE = "inference"
QUEUES = (TRAINING_QUEUE, INFERENCE_QUEUE)

PING = "service.ping"
TRAIN = "service.train"
TRANSLATE = "service.translate"
FILL_MASK = "service.fill_mask"
ATTENTION = "service.attention"
NEIGHBORS = "service.neighbors"
