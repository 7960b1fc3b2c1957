"""An endpoint that echoes the API key in another spelling still shows no key
(issue 23, item 6): case changed, HTML entities, line breaks, base64."""

from __future__ import annotations

import base64
import html

import pytest

from planner.probe.redact import REDACTED, clip, redact

KEY = "sk-Live_9f8e7d6c5b4a/x+y"


def _spellings(key: str) -> dict[str, str]:
    return {
        "upper": key.upper(),
        "lower": key.lower(),
        "decimal entities": "".join(f"&#{ord(c)};" for c in key),
        "hex entities": "".join(f"&#x{ord(c):X};" for c in key),
        "one dash as &#45;": key.replace("-", "&#45;"),
        "html.escape": html.escape(key),
        "split by a newline": key[:7] + "\n" + key[7:],
        "folded over three lines": key[:5] + "\r\n  " + key[5:13] + "\n> " + key[13:],
        "JSON-escaped newline": key[:9] + "\\n" + key[9:],
        "base64": base64.b64encode(key.encode()).decode(),
        "base64 of user:key": base64.b64encode(b"user:" + key.encode()).decode(),
        "base64, two bytes before": base64.b64encode(b"ab" + key.encode() + b"zz").decode(),
        "urlsafe base64": base64.urlsafe_b64encode(b"q" + key.encode()).decode(),
        "upper, entity and newline together": key.upper()[:2] + "&#x2D;\n" + key.upper()[3:],
    }


@pytest.mark.parametrize("how", list(_spellings(KEY)))
def test_an_altered_echo_of_the_key_is_redacted(how: str) -> None:
    echo = _spellings(KEY)[how]
    body = f'403 Forbidden: {{"detail": "bad token {echo}", "hint": "sign in"}}'
    out = redact(body, [KEY])
    assert REDACTED in out and echo not in out
    assert out.startswith("403 Forbidden:") and out.endswith('"hint": "sign in"}')  # the rest is kept


@pytest.mark.parametrize("how", list(_spellings(KEY)))
def test_the_probe_detail_after_clip_holds_no_spelling_of_the_key(how: str) -> None:
    echo = _spellings(KEY)[how]
    out = clip(f"error {echo} " + "x" * 500, 200, [KEY, f"Bearer {KEY}"])
    assert len(out) <= 200 and echo not in out and REDACTED in out


def test_text_without_the_key_is_unchanged() -> None:
    text = "An ordinary reply: Sign in at https://example.com/login, token expired (401)\nretry later"
    assert redact(text, [KEY]) == text


def test_a_short_key_is_redacted_exactly_only() -> None:
    """A key under 8 characters is not matched loosely (it would eat ordinary words)."""
    assert redact("abc ABC a\nbc", ["abc"]) == f"{REDACTED} ABC a\nbc"
