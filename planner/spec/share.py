"""Stateless share links: the whole Scenario in a URL-safe token (``?s=<token>``).

Token = URL-safe base64 (no padding) of ``b"R1" + sha256(json)[:8] + zlib(json)``
where ``json`` is the scenario's canonical JSON.  No database is needed; a
decoded token gives back an equal Scenario.  A tampered, truncated or foreign
token raises :class:`ScenarioError` with a one-line reason.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import zlib

from planner.errors import ScenarioError
from planner.io.jsonfile import SURROGATE_MESSAGE, parse_json
from planner.spec.scenario import Scenario, scenario_from_dict

__all__ = ["MAX_TOKEN_CHARS", "scenario_from_token", "share_token"]

_MAGIC = b"R1"
_DIGEST_BYTES = 8
MAX_TOKEN_CHARS = 16_000  # well under common URL limits; a scenario is ~1 kB of JSON
_MAX_JSON_BYTES = 1_000_000  # refuse to inflate more than this (zip bombs)
_ALPHABET = re.compile(r"^[A-Za-z0-9_-]+$")


def _canonical(scenario: Scenario) -> bytes:
    return json.dumps(scenario.model_dump(mode="json"), sort_keys=True, separators=(",", ":")).encode()


def share_token(scenario: Scenario) -> str:
    """The token for ``scenario`` (put it in a link as ``?s=<token>``)."""
    raw = _canonical(scenario)
    blob = _MAGIC + hashlib.sha256(raw).digest()[:_DIGEST_BYTES] + zlib.compress(raw, 9)
    return base64.urlsafe_b64encode(blob).rstrip(b"=").decode("ascii")


def scenario_from_token(token: str) -> Scenario:
    """Decode and validate a share token."""
    text = (token or "").strip()
    if not text:
        raise ScenarioError("share link: the token is empty")
    if len(text) > MAX_TOKEN_CHARS:
        raise ScenarioError(f"share link: the token is longer than {MAX_TOKEN_CHARS} characters")
    if not _ALPHABET.match(text):
        raise ScenarioError("share link: the token has characters outside URL-safe base64 (was it edited?)")
    try:
        blob = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise ScenarioError("share link: the token is not URL-safe base64 (truncated or edited?)") from None
    if base64.urlsafe_b64encode(blob).rstrip(b"=").decode("ascii") != text:
        raise ScenarioError("share link: the token is not canonical URL-safe base64 (truncated or edited?)")
    if not blob.startswith(_MAGIC) or len(blob) <= len(_MAGIC) + _DIGEST_BYTES:
        raise ScenarioError("share link: not a Ridgeline scenario token (or it was truncated)")
    digest = blob[len(_MAGIC):len(_MAGIC) + _DIGEST_BYTES]
    inflater = zlib.decompressobj()
    try:
        raw = inflater.decompress(blob[len(_MAGIC) + _DIGEST_BYTES:], _MAX_JSON_BYTES)
    except zlib.error:
        raise ScenarioError("share link: the token is damaged (it does not decompress); copy the whole link") from None
    if inflater.unconsumed_tail:
        raise ScenarioError("share link: the token expands to more than 1 MB; refusing it")
    if not inflater.eof:
        raise ScenarioError("share link: the token is truncated; copy the whole link")
    if hashlib.sha256(raw).digest()[:_DIGEST_BYTES] != digest:
        raise ScenarioError("share link: the token's checksum does not match (it was changed or damaged)")
    try:
        data = parse_json(raw, source="token")
    except ScenarioError as exc:
        if SURROGATE_MESSAGE in str(exc):  # JSON, but a field is not text: name the field
            raise ScenarioError(f"share link: {str(exc).removeprefix('token: ')}") from None
        raise ScenarioError(f"share link: the token does not hold JSON ({exc})") from None
    try:
        return scenario_from_dict(data)  # untrusted: a path-shaped model is refused, no file is opened
    except ScenarioError as exc:
        raise ScenarioError(f"share link: {exc}") from None
