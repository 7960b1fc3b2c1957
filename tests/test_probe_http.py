"""The probe's own HTTP/1.1 client (planner/probe/http.py) against a keep-alive
server (tests/servers/keepalive_server.py): each stream keeps one connection
across its requests, a kept-alive connection the server drops before answering
is resent (at most twice) on a new one, and https URLs are served over verified
TLS (a certificate the machine does not trust is a connection failure)."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import ssl
import subprocess
import urllib.request
from pathlib import Path

import pytest
from servers.keepalive_server import TOKENS
from servers.procs import start_script

from planner.probe import probe_settings, run_probe_sync
from planner.probe.client import RequestRecord, make_client, stream_request
from planner.probe.safety import CheckedHost, PinnedResolver


def _stats(url: str, context: ssl.SSLContext | None = None) -> dict[str, int]:
    with urllib.request.urlopen(url.rstrip("/") + "/stats", timeout=30, context=context) as resp:
        return dict(json.loads(resp.read()))


@pytest.fixture()
def keepalive():
    srv = start_script("keepalive_server")
    yield srv
    srv.stop()


@pytest.fixture()
def dropping():
    srv = start_script("keepalive_server", "--drop-reused")
    yield srv
    srv.stop()


def test_each_stream_keeps_one_connection(keepalive):
    s = probe_settings(url=keepalive.url, model="m", concurrency=(2,), requests=12, output_tokens=TOKENS,
                       metrics_url="", request_timeout_s=30)
    lv = run_probe_sync(s).levels[0]
    assert lv.failures == 0 and lv.requests == 12 and lv.output_tokens_total == 12 * TOKENS
    # the two warm-ups opened the two connections; the 12 measured requests reused them
    assert _stats(keepalive.url) == {"connections": 2, "requests": 14, "dropped": 0}


def test_a_kept_alive_connection_dropped_before_answering_is_resent(dropping):
    """Every reused connection is closed unanswered: each request after the first
    fails on it before any response and is resent once, on a new connection."""

    async def go() -> list[RequestRecord]:
        out = []
        async with make_client(max_connections=1, connect_timeout_s=5, read_timeout_s=5) as client:
            for i in range(4):
                rec = RequestRecord(index=i, warmup=False, scheduled_ns=0)
                out.append(await stream_request(client, url=f"{dropping.url}/v1/completions",
                                                body={"max_tokens": TOKENS, "prompt": "x"}, headers={}, rec=rec,
                                                request_timeout_s=30))
        return out

    recs = asyncio.run(go())
    assert [(r.error, r.retries, r.token_chunks) for r in recs] == [(None, 0, TOKENS)] + [(None, 1, TOKENS)] * 3
    assert all(r.reused_connection is False for r in recs)  # each one answered on a new connection
    assert _stats(dropping.url) == {"connections": 4, "requests": 7, "dropped": 3}


def test_a_new_connection_that_fails_is_not_resent():
    """The resend rule is for a stale kept-alive connection only: a new
    connection's failure (here: nothing listens) is recorded, not resent."""

    async def go() -> RequestRecord:
        async with make_client(max_connections=1, connect_timeout_s=5, read_timeout_s=5) as client:
            rec = RequestRecord(index=0, warmup=False, scheduled_ns=0)
            return await stream_request(client, url="http://127.0.0.1:9/v1/completions", body={"max_tokens": 1},
                                        headers={}, rec=rec, request_timeout_s=10)

    rec = asyncio.run(go())
    assert rec.error == "connection" and rec.retries == 0 and rec.status is None


@pytest.fixture(scope="module")
def cert(tmp_path_factory) -> tuple[Path, Path]:
    """A self-signed certificate for localhost and 127.0.0.1."""
    d = tmp_path_factory.mktemp("tls")
    key, crt = d / "key.pem", d / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(crt), "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=120)
    return crt, key


@pytest.fixture()
def tls_server(cert):
    crt, key = cert
    srv = start_script("keepalive_server", "--tls-cert", str(crt), "--tls-key", str(key))
    yield srv
    srv.stop()


def test_https_is_verified_tls(tls_server, cert, monkeypatch):
    crt, _ = cert
    url = f"https://localhost:{tls_server.port}"
    s = probe_settings(url=url, model="m", concurrency=(1,), requests=3, output_tokens=TOKENS, metrics_url="",
                       request_timeout_s=30)
    # a certificate the machine does not trust: every request fails to connect, none is answered
    untrusted = run_probe_sync(s).levels[0]
    assert untrusted.failure_reasons == {"connection": 3}
    assert all("CERTIFICATE_VERIFY_FAILED" in smp.error_detail for smp in untrusted.samples)
    # trusted (the default context reads SSL_CERT_FILE): answered over TLS, on one kept-alive connection
    monkeypatch.setenv("SSL_CERT_FILE", str(crt))
    trusted = run_probe_sync(s).levels[0]
    assert trusted.failures == 0 and trusted.output_tokens_total == 3 * TOKENS
    stats = _stats(url, ssl.create_default_context(cafile=str(crt)))
    assert stats == {"connections": 1, "requests": 4, "dropped": 0}


def test_https_checks_the_host_name(tls_server, cert, monkeypatch):
    """The certificate names localhost and 127.0.0.1: a name pinned to the same
    address that the certificate does not name is refused."""
    crt, _ = cert
    monkeypatch.setenv("SSL_CERT_FILE", str(crt))
    port = tls_server.port
    resolver = PinnedResolver([CheckedHost(host="other.test", port=port, addresses=(ipaddress.ip_address("127.0.0.1"),))])

    async def go(host: str) -> RequestRecord:
        async with make_client(max_connections=1, connect_timeout_s=5, read_timeout_s=5, resolver=resolver) as client:
            rec = RequestRecord(index=0, warmup=False, scheduled_ns=0)
            return await stream_request(client, url=f"https://{host}:{port}/v1/completions",
                                        body={"max_tokens": TOKENS, "prompt": "x"}, headers={}, rec=rec,
                                        request_timeout_s=10)

    ok = asyncio.run(go("127.0.0.1"))
    assert ok.error is None and ok.token_chunks == TOKENS, ok.error_detail
    wrong = asyncio.run(go("other.test"))
    assert wrong.error == "connection" and wrong.status is None and "CERTIFICATE_VERIFY_FAILED" in wrong.error_detail
