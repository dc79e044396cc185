"""API keys: 256-bit random tokens, stored as SHA-256 hex, compared in constant time."""

from __future__ import annotations

import hashlib
import hmac
import secrets

KEY_PREFIX = "tsk_"


def generate_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def key_matches(key: str, stored_hash: str) -> bool:
    return hmac.compare_digest(hash_key(key), stored_hash)


def display_prefix(key: str) -> str:
    """The first characters of a key, safe to show and log (like Stripe's `sk_live_...abcd`)."""
    return key[: len(KEY_PREFIX) + 6]
