"""Why an inference worker refuses a request, with the HTTP status the API answers it with."""

from __future__ import annotations


class RequestError(Exception):
    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status, self.detail = status, detail


class ModelUnavailable(RequestError):
    """The model row is gone (404) or its files are missing or fail verification (503)."""
