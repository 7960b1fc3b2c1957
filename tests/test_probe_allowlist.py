"""The probe's allow-list decides on the address it connects to: every IPv6 form
that carries an IPv4 address is judged as that address, metadata, link-local,
unspecified, multicast and broadcast are refused whatever PROBE_ALLOWED_HOSTS
says, a name is resolved once, and the connection goes to the checked address."""

from __future__ import annotations

import json
import socket
import urllib.request

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from servers.hits import hits
from servers.procs import start_script

from planner import ProbeError
from planner.probe import (
    ALLOWED_HOSTS_ENV,
    check_url_allowed,
    normalise_address,
    probe_settings,
    redact,
    resolve_allowed,
    run_probe_sync,
)
from planner.probe.redact import REDACTED, check_url_secrets, clip, credential_params

EVERYTHING = "0.0.0.0/0, ::/0"  # an allow-list that lists every address
PRIVATE = "10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, 127.0.0.0/8, fc00::/7, ::1/128"  # private ranges allowed

# (host as written in the URL, allowed by default, allowed when PROBE_ALLOWED_HOSTS lists everything)
TABLE = [
    # plain loopback and private
    ("127.0.0.1", True, True),
    ("10.1.2.3", True, True),
    ("172.16.0.1", True, True),
    ("192.168.0.5", True, True),
    ("[::1]", True, True),
    ("[fd12:3456::1]", True, True),
    # public
    ("8.8.8.8", False, True),
    ("[2606:4700::1111]", False, True),
    # IPv4-mapped / -translated / -compatible, NAT64 and 6to4 forms: judged as their IPv4
    ("[::ffff:127.0.0.1]", True, True),
    ("[::ffff:7f00:1]", True, True),
    ("[::ffff:10.0.0.1]", True, True),
    ("[::ffff:8.8.8.8]", False, True),
    ("[64:ff9b::a00:1]", True, True),  # NAT64 of 10.0.0.1
    ("[2002:c0a8:1::1]", True, True),  # 6to4 of 192.168.0.1
    ("[::7f00:1]", True, True),  # IPv4-compatible 127.0.0.1
    # cloud metadata in every spelling: never
    ("169.254.169.254", False, False),
    ("[::ffff:169.254.169.254]", False, False),
    ("[::ffff:a9fe:a9fe]", False, False),
    ("[::ffff:0:a9fe:a9fe]", False, False),  # IPv4-translated
    ("[::a9fe:a9fe]", False, False),  # IPv4-compatible
    ("[64:ff9b::a9fe:a9fe]", False, False),  # NAT64
    ("[2002:a9fe:a9fe::1]", False, False),  # 6to4
    ("[fd00:ec2::254]", False, False),  # AWS IMDS over IPv6 (a "private" unique-local address)
    ("[fd20:ce::254]", False, False),  # GCP metadata over IPv6
    ("100.100.100.200", False, False),  # Alibaba Cloud
    ("168.63.129.16", False, False),  # Azure WireServer
    ("192.0.0.192", False, False),  # Oracle Cloud Classic
    ("[::ffff:100.100.100.200]", False, False),
    # link-local, unspecified, multicast, broadcast/reserved
    ("169.254.1.1", False, False),
    ("[fe80::1]", False, False),
    ("[::ffff:169.254.1.1]", False, False),
    ("0.0.0.0", False, False),
    ("0.1.2.3", False, False),
    ("[::]", False, False),
    ("[::ffff:0.0.0.0]", False, False),
    ("224.0.0.1", False, False),
    ("[ff02::1]", False, False),
    ("[::ffff:224.0.0.1]", False, False),
    ("255.255.255.255", False, False),
    ("240.0.0.1", False, False),
    ("[2002:ffff:ffff::1]", False, False),  # 6to4 of the broadcast address
    # forms whose IPv4 cannot be read off the address
    ("[2001::a9fe:a9fe]", False, False),  # Teredo
    ("[64:ff9b:1::a9fe:a9fe]", False, False),  # local-use NAT64
    # numeric spellings the OS would read differently from a dotted quad
    ("2130706433", False, False),
    ("0177.0.0.1", False, False),
    ("127.1", False, False),
    ("127.0.0.1.", False, False),
    ("[fe80::1%25lo]", False, False),
]


@pytest.mark.parametrize(("host", "default_ok", "everything_ok"), TABLE)
def test_allow_list_table(host, default_ok, everything_ok, monkeypatch):
    url = f"http://{host}:8000/v1"
    monkeypatch.delenv(ALLOWED_HOSTS_ENV, raising=False)
    for allowed, ok in ((None, default_ok), (EVERYTHING, everything_ok)):
        if ok:
            assert check_url_allowed(url, allowed=allowed) == url
        else:
            with pytest.raises(ProbeError, match=r"^url: "):
                check_url_allowed(url, allowed=allowed)


@pytest.mark.parametrize("host", ["[fd00:ec2::254]", "[fd20:ce::254]", "169.254.169.254", "[::ffff:a9fe:a9fe]",
                                  "[::]", "[ff02::1]", "255.255.255.255"])
def test_refused_even_when_private_ranges_or_the_address_itself_are_listed(host):
    addr = host.strip("[]")
    for allowed in (PRIVATE, EVERYTHING, f"{addr}/{32 if '.' in addr else 128}"):
        with pytest.raises(ProbeError, match="refused even if PROBE_ALLOWED_HOSTS lists it"):
            check_url_allowed(f"http://{host}/", allowed=allowed)


def test_private_ranges_listed_still_allow_private_addresses():
    assert check_url_allowed("http://[fd12::1]/", allowed=PRIVATE)
    assert check_url_allowed("http://10.2.3.4/", allowed=PRIVATE)
    with pytest.raises(ProbeError, match=ALLOWED_HOSTS_ENV):
        check_url_allowed("http://8.8.8.8/", allowed=PRIVATE)


@pytest.mark.parametrize(("v6", "v4"), [("::ffff:1.2.3.4", "1.2.3.4"), ("::ffff:0:1.2.3.4", "1.2.3.4"),
                                        ("::1.2.3.4", "1.2.3.4"), ("64:ff9b::1.2.3.4", "1.2.3.4"),
                                        ("2002:102:304::9", "1.2.3.4"), ("::1", "::1"), ("::", "::"),
                                        ("fd00::1", "fd00::1")])
def test_normalise(v6, v4):
    import ipaddress

    assert normalise_address(ipaddress.ip_address(v6)) == ipaddress.ip_address(v4)


class FakeDns:
    """socket.getaddrinfo for test names: answers[name] is a list of answers, one per call
    (the last repeats); other names go to the real resolver.  Counts calls per name."""

    def __init__(self, monkeypatch, answers: dict[str, list[list[str]]]) -> None:
        self.answers, self.calls = answers, {n: 0 for n in answers}
        self.real = socket.getaddrinfo
        monkeypatch.setattr(socket, "getaddrinfo", self)

    def __call__(self, host, port, family=0, type=0, proto=0, flags=0):  # noqa: A002 - socket's signature
        name = host.decode() if isinstance(host, bytes) else str(host)
        if name.rstrip(".").lower() not in self.answers:
            return self.real(host, port, family, type, proto, flags)
        key = name.rstrip(".").lower()
        self.calls[key] += 1
        addrs = self.answers[key][min(self.calls[key], len(self.answers[key])) - 1]
        out = []
        for a in addrs:
            fam = socket.AF_INET6 if ":" in a else socket.AF_INET
            out.append((fam, socket.SOCK_STREAM, 6, "", (a, int(port or 0), 0, 0) if ":" in a else (a, int(port or 0))))
        return out


def test_every_resolved_address_is_checked(monkeypatch):
    FakeDns(monkeypatch, {"mixed.test": [["127.0.0.1", "169.254.169.254"]],
                          "mapped.test": [["::ffff:169.254.169.254"]],
                          "aws6.test": [["fd00:ec2::254"]],
                          "fine.test": [["127.0.0.1", "::1"]]})
    for name in ("mixed.test", "mapped.test", "aws6.test"):
        with pytest.raises(ProbeError, match="not allowed"):
            check_url_allowed(f"http://{name}:8000/")
    checked = resolve_allowed("http://fine.test:8000/")
    assert [str(a) for a in checked.addresses] == ["127.0.0.1", "::1"] and checked.port == 8000


def test_listed_name_keeps_its_meaning_but_not_for_metadata(monkeypatch):
    """A name in PROBE_ALLOWED_HOSTS is allowed without its addresses being in the
    list, as before; a name that resolves to a metadata address is still refused
    before any connection."""
    dns = FakeDns(monkeypatch, {"inference.internal": [["8.8.4.4"]], "evil.internal": [["169.254.169.254"]]})
    monkeypatch.setenv(ALLOWED_HOSTS_ENV, "inference.internal, evil.internal")
    assert check_url_allowed("http://inference.internal:8000") and dns.calls["inference.internal"] == 0
    assert [str(a) for a in resolve_allowed("http://inference.internal:8000").addresses] == ["8.8.4.4"]
    with pytest.raises(ProbeError, match="cloud metadata"):
        resolve_allowed("http://evil.internal:8000")
    s = probe_settings(url="http://evil.internal:8000", model="m", concurrency=(1,), requests=1)
    with pytest.raises(ProbeError, match="cloud metadata"):
        run_probe_sync(s)


@pytest.fixture()
def two_hosts():
    """Two servers on one port: 127.0.0.1 (the checked address) and 127.0.0.2 (what a
    second DNS answer would point to)."""
    first = start_script("hostile_server")
    second = start_script("hostile_server", "--host", "127.0.0.2", "--port", str(first.port))
    second.url = f"http://127.0.0.2:{second.port}"
    yield first, second
    first.stop()
    second.stop()



def test_connection_goes_to_the_checked_address(two_hosts, monkeypatch):
    """DNS rebinding: the first answer is checked, every later one points elsewhere.
    The name is resolved once and every request and scrape goes to the first answer."""
    first, second = two_hosts
    dns = FakeDns(monkeypatch, {"rebind.test": [["127.0.0.1"], ["127.0.0.2"]]})
    s = probe_settings(url=f"http://rebind.test:{first.port}/ok", model="m", concurrency=(1, 2), requests=4,
                       output_tokens=5, request_timeout_s=10)
    run = run_probe_sync(s)
    assert all(lv.failures == 0 and lv.requests == 4 for lv in run.levels)
    assert run.metrics["available"]  # the scrapes went through the same pinned address
    assert dns.calls["rebind.test"] == 1
    assert hits(second.url) == 0
    assert hits(first.url) >= 2 * 4 + 1 + 2  # measured requests, warm-ups, scrapes


def test_unchecked_host_is_never_resolved_by_the_client(monkeypatch):
    """The pinned resolver answers only for checked names (a redirect target is not one)."""
    import asyncio

    from planner.probe import PinnedResolver

    dns = FakeDns(monkeypatch, {"pinned.test": [["127.0.0.1"]], "other.test": [["127.0.0.1"]]})
    resolver = PinnedResolver([resolve_allowed("http://pinned.test:8000/")])

    async def go():
        assert [r["host"] for r in await resolver.resolve("pinned.test", 8000, socket.AF_UNSPEC)] == ["127.0.0.1"]
        with pytest.raises(OSError, match="not checked"):
            await resolver.resolve("other.test", 80)

    asyncio.run(go())
    assert dns.calls == {"pinned.test": 1, "other.test": 0}


def test_a_resolver_that_never_answers_costs_the_connect_timeout(monkeypatch):
    """getaddrinfo cannot be interrupted: the run gives up after connect_timeout_s
    and returns (it does not wait for the stuck lookup)."""
    import threading

    release = threading.Event()
    real = socket.getaddrinfo

    def stuck(host, *args, **kwargs):
        if str(host).startswith("stuck.test"):
            release.wait(120)
            raise socket.gaierror(socket.EAI_AGAIN, "timed out")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", stuck)
    s = probe_settings(url="http://stuck.test:8000", model="m", concurrency=(1,), requests=1, connect_timeout_s=1)
    errors: list[BaseException] = []

    def go() -> None:
        try:
            run_probe_sync(s)
        except BaseException as exc:  # noqa: BLE001 - inspected below
            errors.append(exc)

    t = threading.Thread(target=go, daemon=True)
    t.start()
    t.join(60)  # far below the stuck lookup's 120 s
    finished = not t.is_alive()
    release.set()
    assert finished, "the run waited for the stuck lookup"
    assert len(errors) == 1 and isinstance(errors[0], ProbeError)
    assert "resolving the host took over 1 s" in str(errors[0])


# ---------------------------------------------------------------- secrets in URLs and text

SECRET = "sk-url-0a1b2c3d4e5f"


@pytest.mark.parametrize("url", [
    f"http://127.0.0.1:8000/v1?api_key={SECRET}", f"http://127.0.0.1:8000/v1?key={SECRET}",
    f"http://127.0.0.1:8000/v1?token={SECRET}", f"http://127.0.0.1:8000/v1?access_token={SECRET}",
    f"http://127.0.0.1:8000/v1?sig={SECRET}", f"http://127.0.0.1:8000/v1?a=1&password={SECRET}",
    f"http://127.0.0.1:8000/v1?X-Amz-Signature={SECRET}", f"http://127.0.0.1:8000/v1?client_secret={SECRET}",
    f"http://127.0.0.1:8000/v1#access_token={SECRET}", f"http://user:{SECRET}@127.0.0.1:8000/v1",
])
def test_credentials_in_the_url_are_refused_without_echoing_them(url):
    for field in ("url", "metrics_url"):
        kwargs = {"url": "http://127.0.0.1:8000", field: url}
        with pytest.raises(ProbeError) as err:
            probe_settings(model="m", **kwargs)
        assert str(err.value).startswith(f"{field}: ") and SECRET not in str(err.value)
    from pydantic import ValidationError

    from planner.probe.settings import ProbeSettings

    with pytest.raises(ValidationError) as verr:
        ProbeSettings(url=url, model="m")
    assert SECRET not in str(verr.value)


def test_harmless_query_parameters_pass():
    assert credential_params("http://h/v1?api-version=2024-02-01&model=x") == []
    assert check_url_secrets("http://h/v1?api-version=2024-02-01") == "http://h/v1?api-version=2024-02-01"


def test_redact_covers_the_spellings_a_server_echoes():
    key = 'sk-"q/+ &'
    text = f'raw {key} json {json.dumps(key)} pct {urllib.parse.quote(key, safe="")} plus {urllib.parse.quote_plus(key)}'
    out = redact(text, [key])
    assert key not in out and json.dumps(key)[1:-1] not in out and urllib.parse.quote(key, safe="") not in out
    assert out.count(REDACTED) == 4


@given(before=st.text(max_size=300), after=st.text(max_size=300), limit=st.integers(0, 700),
       key=st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=8, max_size=60))
@example(before="", after="", limit=8, key="[redacte")  # the cut marker spelled the key (CI, stop 43)
def test_clip_never_keeps_the_key_or_a_cut_half_of_it(before, after, limit, key):
    out = clip(before + key + after, limit, [key])
    full = redact(before + key + after, [key])
    assert key not in out
    assert out == full if len(full) <= limit else len(out) <= limit
    # a cut never leaves the key's first half behind
    assert not out.endswith(key[: max(4, len(key) // 2)])


@pytest.mark.parametrize("key, text", [
    ("d][redac", "d][redacd][redac"),  # two markers side by side spell it
    ("[redacted]", "x [redacted] y"),  # the marker itself
    ("ted][red", "ted][redted][red"),
])
def test_redact_never_spells_the_key_with_its_markers(key, text):
    out = redact(text, [key])
    assert key not in out
    assert key not in clip(text, 12, [key])
