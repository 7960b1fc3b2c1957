"""The one escape for a stranger's text inside rendered Markdown (issue 23, item 2).
What a real browser draws of it is tests/test_browser_markdown.py; here the text."""

from __future__ import annotations

import re

import pytest

from planner.io.formatting import WORD_JOINER, markdown_code, markdown_text
from planner.views.link import parse_link

LISTENER = "http://127.0.0.1:9/img"
PAYLOADS = [
    f"![]({LISTENER})",
    "[x](javascript:alert(1))",
    f"\n\n![]({LISTENER})",
    f"<img src={LISTENER}>",
    f"<{LISTENER}>",
    f"[x]: {LISTENER}\n\n[x]",
    f"see {LISTENER} or www.example.com or mail admin@example.com",
    ":red[alarm] :material/warning: $x^2$ **bold** _em_ ~~gone~~ `code`",
    "# heading",
    "1. item",
    "- bullet",
    "> quote",
]


def _unescaped(text: str) -> str:
    """What a CommonMark renderer shows for backslash-escaped text (no markup left)."""
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", text).replace(WORD_JOINER, "")


@pytest.mark.parametrize("payload", PAYLOADS)
def test_markdown_text_leaves_no_markup_and_reads_as_typed(payload: str) -> None:
    out = markdown_text(payload)
    assert "\n" not in out and "\r" not in out
    # every bracket, angle bracket, backtick, asterisk, tilde and dollar is escaped
    assert not re.search(r"(?<!\\)[\[\]<`*~$]", out.replace("\\\\", "")), out
    # no autolink literal survives: each scheme, www. and user@ is broken by the joiner
    assert not re.search(r"(?i)https?:|www\.|\w@", out.replace(WORD_JOINER, "\x00")), out
    assert _unescaped(out).split() == payload.split()  # shown as typed, on one line


@pytest.mark.parametrize("text", ["10 req/s", "2.75 USD", "llama-3.1-70b on h100-sxm", "mlp_only_layers",
                                  "parallel.tp (3) exceeds the 8 GPUs", "Review 70B H200"])
def test_our_own_plain_text_is_unchanged(text: str) -> None:
    assert markdown_text(text) == text


def test_markdown_code_is_one_closed_span() -> None:
    assert markdown_code("a`b\n\n![](x)") == "`a'b ![](x)`"
    assert markdown_code("") == "` `"


def test_a_link_parameter_cannot_leave_its_code_span() -> None:
    """``/?gpu=%0A%0A![](…)`` and the same as an unknown key: the echo is one code span."""
    bad = f"\n\n![]({LISTENER})"
    _, problems = parse_link({"gpu": [bad], bad: ["1"]}, {"gpu": ["h100-sxm"]})
    assert len(problems) == 2
    for p in problems:
        assert "\n" not in p
        spans = re.findall(r"`[^`]*`", p)
        assert any("![](" in s for s in spans), p  # the image syntax is inside a span, where it is literal
        assert "![](" not in re.sub(r"`[^`]*`", "", p), p
