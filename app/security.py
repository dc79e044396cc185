"""API keys: 256-bit random tokens, stored as SHA-256 hex, compared in constant time, redacted from logs."""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import secrets

KEY_PREFIX = "tsk_"
_KEY = re.compile(re.escape(KEY_PREFIX) + r"[A-Za-z0-9_-]+")
_SECRET_PARAM = re.compile(r"(?i)([?&;](?:api[_-]?key|key|token|access[_-]?token|auth|authorization)=)[^&;\s\"]*")


def generate_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def key_matches(key: str, stored_hash: str) -> bool:
    return hmac.compare_digest(hash_key(key), stored_hash)


def display_prefix(key: str) -> str:
    """The first characters of a key, safe to show and log (like Stripe's `sk_live_...abcd`)."""
    return key[: len(KEY_PREFIX) + 6]


def redact_keys(text: str) -> str:
    """`text` with every API key (and any query parameter named like a credential) replaced by `[redacted]`."""
    return _KEY.sub(KEY_PREFIX + "[redacted]", _SECRET_PARAM.sub(r"\1[redacted]", text))


class RedactKeys(logging.Filter):
    """Redacts keys from log records: uvicorn's access log prints each request's path and query, where a client
    may have pasted a key (`?api_key=...`, or as an id). Headers are never logged."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact_keys(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(redact_keys(a) if isinstance(a, str) else a for a in record.args)
        return True


REDACT_KEYS = RedactKeys()
