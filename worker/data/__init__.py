"""Datasets on a worker: where a dataset's file is on this host, parsing and reporting it, filtering it into another."""
