"""API keys: 256-bit random tokens, stored as SHA-256 hex, compared in constant time, redacted from logs.

Logs also lose other credentials (`redact_keys`): a URL's password, a credential-like query parameter, the value of
a `name=value` or `name: value` pair whose name says it is a credential (password, secret, token, access key), and
the secret values of the settings (`add_secrets`, which app/core/logs.configure calls), wherever they appear.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets

KEY_PREFIX = "tsk_"
_KEY = re.compile(re.escape(KEY_PREFIX) + r"[A-Za-z0-9_-]+")
# A credential-like query parameter's value ends at a separator, a space, a quote or a quote's JSON escape.
_SECRET_PARAM = re.compile(r"(?i)([?&;](?:api[_-]?key|key|token|access[_-]?token|auth|authorization)=)[^&;\s\"\\]*")
# The password of a URL's user (postgresql://user:password@host, redis://:password@host) ends at its last "@".
_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^:/?#@\s\"]*:)[^/?#\s\"]*@")
# Names that say their value is a credential: password, db_password, secret, client_secret, aws_secret_access_key,
# access_key_id, api_key, auth_token, aws_session_token, a bare token as `token=` or a quoted key ("token": ...; in
# prose, "unknown token: cat" names a vocabulary's token). Not eos_token or max_tokens: a token that is not a
# credential is qualified otherwise, or plural.
_CREDENTIAL_NAME = (
    r"(?:[a-z0-9]+[_-])*(?:password|passwd|secret(?:[_-]?access)?(?:[_-]?key)?|access[_-]?key(?:[_-]?id)?"
    r"|api[_-]?key|private[_-]?key|(?:access|auth|refresh|session|bearer|api|security|id)[_-]?token)|token"
)
# name=value, name: value, 'name': 'value', "name": "value" (also as JSON escapes them, \"name\": \"value\"). A
# quoted value ends at a quote; a bare one at a space, a quote, a separator or a closing bracket. One redacted
# already (a query parameter's, a setting's) stays as it is.
_CREDENTIAL_PAIR = re.compile(
    rf"(?i)(?<![\w-])({_CREDENTIAL_NAME})(\\?[\"'])?(\s*[:=]\s*)(\\?[\"'])?(?!\[redacted\])(?(4)[^\"'\\]+|[^\s\"'\\,;&)}}\]]+)"
)
_MIN_SECRET = 6  # a shorter setting is not redacted wherever it appears (it would cut words, not hide a secret)
_secrets: set[str] = set()


def generate_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def key_matches(key: str, stored_hash: str) -> bool:
    return hmac.compare_digest(hash_key(key), stored_hash)


def display_prefix(key: str) -> str:
    """The first characters of a key, safe to show and log (like Stripe's `sk_live_...abcd`)."""
    return key[: len(KEY_PREFIX) + 6]


def add_secrets(*values: str) -> None:
    """Values redacted from every log line from now on (the S3 secret key, the metrics token), also as JSON
    escapes them."""
    for value in values:
        if len(value) >= _MIN_SECRET:
            _secrets.update({value, json.dumps(value, ensure_ascii=False)[1:-1]})


def _redacted_pair(match: re.Match[str]) -> str:
    name, quote, separator, value_quote = match.group(1, 2, 3, 4)
    if name.lower() == "token" and quote is None and "=" not in separator:
        return match.group(0)  # "unknown token: cat", "eos token: </s>": a vocabulary's token, not a credential
    return f"{name}{quote or ''}{separator}{value_quote or ''}[redacted]"


def redact_keys(text: str) -> str:
    """`text` with every API key (and any query parameter or `name=value` / `name: value` pair named like a
    credential, a URL's password and the secrets of the settings) replaced by `[redacted]`."""
    for value in sorted(_secrets, key=len, reverse=True):
        text = text.replace(value, "[redacted]")
    text = _URL_PASSWORD.sub(r"\1[redacted]@", _SECRET_PARAM.sub(r"\1[redacted]", text))
    text = _CREDENTIAL_PAIR.sub(_redacted_pair, text)
    return _KEY.sub(KEY_PREFIX + "[redacted]", text)
