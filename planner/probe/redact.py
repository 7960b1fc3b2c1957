"""Secrets out of everything the probe stores or prints.

- :func:`redact` replaces an API key, by value, in any text that came from the
  endpoint or from an exception (an error body that echoes the Authorization
  header, a malformed event that quotes it), in its raw, JSON-escaped and
  percent-encoded spellings, and (a key of 8 characters or more) upper- or
  lower-cased, HTML-entity-encoded (``&#45;``), split across lines, and
  base64-encoded at any alignment; :func:`clip` also drops a key cut in half at
  the end of a truncated text.
- :func:`check_url_secrets` refuses a probe URL that carries credentials: a
  ``user:password@`` part or a credential-looking query parameter (``key``,
  ``api_key``, ``token``, ``access_token``, ``sig``, ``password``, ...).
- :func:`check_api_key` refuses a key that cannot travel in an HTTP header
  (a line break would otherwise make every request fail with an exception).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable
from urllib.parse import parse_qsl, quote, quote_plus, urlsplit

from planner.errors import ProbeError

__all__ = ["REDACTED", "check_api_key", "check_url_secrets", "clip", "credential_params", "redact",
           "secrets_of_headers"]

REDACTED = "[redacted]"
# A key cut at the end of a truncated text is dropped when at least this many of
# its first characters remain (fewer cannot identify it).
_MIN_PREFIX = 4

# Query parameter names that carry credentials: exact names, and any name ending
# in _key/-key/_token/-token/_secret/_password/_sig (e.g. x-api-key, id_token,
# client_secret, X-Amz-Signature, sv/sig of SAS URLs).
_CRED_EXACT = re.compile(
    r"^(key|apikey|api[-_]key|token|access[-_]?token|auth|authorization|bearer|sig|signature|password|passwd|"
    r"pass|pwd|secret|credential|credentials|session|sessionid|code|jwt|x-amz-credential|x-amz-security-token)$",
    re.I,
)
_CRED_SUFFIX = re.compile(r"[-_.](key|token|secret|password|sig|signature|credential)$", re.I)


def _forms(secret: str) -> list[str]:
    """The spellings a server may echo a secret in."""
    forms = [secret, json.dumps(secret)[1:-1], quote(secret, safe=""), quote_plus(secret)]
    return sorted({f for f in forms if f}, key=len, reverse=True)


def secrets_of_headers(headers: dict[str, str]) -> list[str]:
    """The secret values among request headers: an Authorization header's value
    and its credential (after ``Bearer``/``Basic``), and any *key*/*token* header."""
    out: list[str] = []
    for name, value in headers.items():
        low = name.lower()
        if low in ("authorization", "proxy-authorization"):
            out.append(value)
            parts = value.split(None, 1)
            if len(parts) == 2:
                out.append(parts[1])
        elif "key" in low or "token" in low or "secret" in low:
            out.append(value)
    return [s for s in out if s]


# A secret at least this long is also found in its altered spellings (case changed,
# entity-, percent- or \\u-escaped characters, split across lines, base64): a
# shorter one would match ordinary words.
_FUZZY_MIN_CHARS = 8
# Between two characters of an echoed secret: a line break (raw or JSON-escaped)
# with the indentation or quote marker a folded line carries.
_SPLIT = r"(?:[ \t]*(?:\r\n|\r|\n|\\r\\n|\\n|\\r)[ \t>]*)?"
_NAMED = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;|&apos;"}


def _char(ch: str) -> str:
    """Every spelling of one character an echo may use, in either case."""
    alts = {re.escape(ch)}
    for c in {ch, ch.lower(), ch.upper()}:
        o = ord(c)
        alts |= {f"&#0*{o};", f"&#x0*{o:x};", f"%{o:02x}", f"\\\\u{o:04x}"}
        if c in _NAMED:
            alts.add(_NAMED[c])
        if c in '"\\/':
            alts.add(re.escape("\\" + c))
    return "(?:" + "|".join(sorted(alts)) + ")"


def _fuzzy(secret: str) -> re.Pattern[str]:
    """The secret in any case, each character as itself or an HTML entity (``&#45;``,
    ``&#x2d;``, ``&amp;``), ``%2d`` or ``\\u002d``, a line break allowed between any two."""
    return re.compile(_SPLIT.join(_char(c) for c in secret), re.IGNORECASE)


def _base64_cores(secret: str) -> list[str]:
    """The secret's base64 (standard and URL-safe) at each of the three alignments it
    can have inside a longer encoded text, less the edge characters its neighbours change."""
    raw = secret.encode("utf-8", "replace")
    out: set[str] = set()
    for shift in range(3):
        enc = base64.b64encode(b"\0" * shift + raw).decode("ascii").rstrip("=")
        start = -(-shift * 4 // 3)  # the characters that also carry the prefix
        end = len(enc) - (0 if (shift + len(raw)) % 3 == 0 else 1)  # the last one carries what follows
        core = enc[start:end]
        if len(core) >= _FUZZY_MIN_CHARS:
            out |= {core, core.replace("+", "-").replace("/", "_")}
    return sorted(out, key=len, reverse=True)


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every spelling of every secret replaced by ``[redacted]``: exact,
    JSON- and percent-encoded; and for a secret of at least 8 characters also upper-
    or lower-cased, HTML-entity-encoded, split across lines and base64-encoded."""
    secrets = list(secrets)
    for secret in secrets:
        for form in _forms(secret):
            text = text.replace(form, REDACTED)
        if len(secret) >= _FUZZY_MIN_CHARS:
            text = _fuzzy(secret).sub(REDACTED, text)
            for core in _base64_cores(secret):
                text = text.replace(core, REDACTED)
    return _spelled_nowhere(text, secrets)


def _spelled_nowhere(text: str, secrets: Iterable[str]) -> str:
    """``text`` unless the markers and cuts spell a secret again (a key that is a piece of
    ``[redacted]``, or spans two markers): then without those spellings, once, or "" where even
    that leaves one (a hostile server, which holds the key, could nest it)."""
    forms = [f for secret in secrets for f in _forms(secret) if f]
    if not any(f in text for f in forms):
        return text
    for f in forms:
        text = text.replace(f, "")
    return "" if any(f in text for f in forms) else text


def clip(text: str, limit: int, secrets: Iterable[str]) -> str:
    """Redact, cut to at most ``limit`` characters, then drop a secret's prefix
    left at the cut (replaced by "…")."""
    secrets = list(secrets)
    out = redact(text, secrets)
    if len(out) <= limit:
        return out
    out = out[:limit]
    for secret in secrets:
        for form in _forms(secret):
            for n in range(min(len(form) - 1, len(out)), min(_MIN_PREFIX, len(form)) - 1, -1):
                if n > 0 and out.endswith(form[:n]):
                    out = out[:-n] + "…"
                    break
    return _spelled_nowhere(out, secrets)


def credential_params(url: str) -> list[str]:
    """Names of the query (and fragment) parameters of ``url`` that look like credentials."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    names = [k for k, _ in parse_qsl(parts.query, keep_blank_values=True)]
    names += [k for k, _ in parse_qsl(parts.fragment, keep_blank_values=True)]
    return [n for n in dict.fromkeys(names) if _CRED_EXACT.match(n.strip()) or _CRED_SUFFIX.search(n.strip())]


def check_url_secrets(url: str) -> str:
    """Return ``url``, or raise ValueError (the settings turn it into one line
    naming the field) when it carries credentials; the message never quotes them."""
    try:
        parts = urlsplit(url)
        has_userinfo = "@" in parts.netloc
    except ValueError:
        raise ValueError("not a valid URL") from None
    if has_userinfo:
        raise ValueError("credentials in the URL (user:password@) are not accepted; use --api-key-env")
    names = credential_params(url)
    if names:
        raise ValueError(f"query parameter {names[0][:40]!r} looks like a credential and would be stored with "
                         "the run; remove it and pass the key with --api-key-env (never stored)")
    return url


def check_api_key(key: str | None) -> str | None:
    """Return ``key``, or raise :class:`ProbeError` if it cannot be sent as a header
    value (the message does not quote it)."""
    if key is None:
        return None
    if not key or any(not (0x21 <= ord(c) <= 0x7E) for c in key):
        raise ProbeError("api key: only visible ASCII characters are accepted (it contains a line break, "
                         "space, control or non-ASCII character); check the variable's value")
    return key
