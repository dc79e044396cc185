"""API keys: 256-bit random tokens, stored as SHA-256 hex, compared in constant time, redacted from logs."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets

KEY_PREFIX = "tsk_"
_KEY = re.compile(re.escape(KEY_PREFIX) + r"[A-Za-z0-9_-]+")
# A credential-like query parameter's value ends at a separator, a space, a quote or a quote's JSON escape.
_SECRET_PARAM = re.compile(r"(?i)([?&;](?:api[_-]?key|key|token|access[_-]?token|auth|authorization)=)[^&;\s\"\\]*")
# The password of a URL's user (postgresql://user:password@host, redis://:password@host) ends at its last "@".
_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^:/?#@\s\"]*:)[^/?#\s\"]*@")


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
    """`text` with every API key (and any query parameter named like a credential, and a URL's password)
    replaced by `[redacted]`."""
    text = _URL_PASSWORD.sub(r"\1[redacted]@", _SECRET_PARAM.sub(r"\1[redacted]", text))
    return _KEY.sub(KEY_PREFIX + "[redacted]", text)
