"""Serving trained models on the inference queue: a per-process model cache and micro-batching."""
