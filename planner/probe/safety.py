"""Which endpoints the probe may load, and where its API key comes from.

The probe sends many requests, so a shared deployment must not be turned
against arbitrary hosts: every URL is checked against an allow-list BEFORE any
connection is made.  ``PROBE_ALLOWED_HOSTS`` (comma-separated host names, IP
addresses or CIDR networks) replaces the default, which is loopback and
private addresses only (link-local 169.254/16 and fe80::/10 excluded: that is
where cloud metadata services live).

API keys come from an environment variable or an argument, live only in memory
(in the request header) and are never stored, exported, logged or put in a URL.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from urllib.parse import urlsplit

from planner.errors import ProbeError

__all__ = ["ALLOWED_HOSTS_ENV", "allowed_hosts", "api_key_from", "check_url_allowed"]

ALLOWED_HOSTS_ENV = "PROBE_ALLOWED_HOSTS"

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
IpAddr = ipaddress.IPv4Address | ipaddress.IPv6Address


def allowed_hosts(env_value: str | None = None) -> tuple[tuple[str, ...], tuple[Network, ...]] | None:
    """Parse ``PROBE_ALLOWED_HOSTS`` into (names, networks); None means the default
    (loopback and private addresses)."""
    raw = os.environ.get(ALLOWED_HOSTS_ENV) if env_value is None else env_value
    if raw is None or not raw.strip():
        return None
    names: list[str] = []
    nets: list[Network] = []
    for item in (p.strip() for p in raw.split(",")):
        if not item:
            continue
        try:
            nets.append(ipaddress.ip_network(item.strip("[]"), strict=False))
        except ValueError:
            names.append(item.lower().rstrip("."))
    return tuple(names), tuple(nets)


def _default_allows(addr: IpAddr) -> bool:
    if addr.is_link_local or addr.is_unspecified or addr.is_multicast:
        return False
    return addr.is_loopback or addr.is_private


def _addresses(host: str, port: int) -> list[IpAddr]:
    try:
        return [ipaddress.ip_address(host.strip("[]"))]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise ProbeError(f"url: cannot resolve host {host!r} ({exc.strerror or exc})") from None
    out: list[IpAddr] = []
    for info in infos:
        addr = ipaddress.ip_address(str(info[4][0]).split("%")[0])
        if addr not in out:
            out.append(addr)
    return out


def check_url_allowed(url: str, *, allowed: str | None = None) -> str:
    """Return ``url`` if its host is allowed, else raise :class:`ProbeError`.

    ``allowed`` overrides ``PROBE_ALLOWED_HOSTS`` (same syntax).  Host names are
    resolved (no connection is made) and every address must be allowed, unless
    the name itself is listed.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ProbeError(f"url: expected http:// or https://, got {url.split('://')[0]!r}")
    if parts.username or parts.password:
        raise ProbeError("url: credentials in the URL are not accepted; use --api-key-env")
    host = (parts.hostname or "").lower().rstrip(".")
    if not host:
        raise ProbeError("url: no host")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise ProbeError("url: invalid port") from None
    rules = allowed_hosts(allowed)
    if rules is not None and host in rules[0]:
        return url
    addrs = _addresses(host, port)
    for addr in addrs:
        ok = _default_allows(addr) if rules is None else any(addr in net for net in rules[1])
        if not ok:
            where = "loopback and private addresses" if rules is None else f"{ALLOWED_HOSTS_ENV}"
            raise ProbeError(
                f"url: host {host!r} ({addr}) is not allowed; the probe only loads {where} "
                f"(set {ALLOWED_HOSTS_ENV} to allow it)"
            )
    return url


def api_key_from(*, api_key: str | None = None, api_key_env: str | None = None) -> str | None:
    """The key to send: ``api_key`` if given, else the value of ``api_key_env``."""
    if api_key:
        return api_key
    if api_key_env:
        value = os.environ.get(api_key_env)
        if not value:
            raise ProbeError(f"--api-key-env: environment variable {api_key_env} is not set or empty")
        return value
    return None
