"""Which endpoints the probe may load, decided on the address it connects to.

The probe sends many requests, so a shared deployment must not be turned
against arbitrary hosts.  Before any connection every URL's host is resolved
ONCE and every address it resolves to is checked; the probe then connects only
to those checked addresses (:class:`PinnedResolver`, an aiohttp resolver that
answers from the checked set and refuses any other name; the streaming client,
:mod:`planner.probe.http`, asks it too), so a second DNS answer cannot move it
elsewhere (DNS rebinding).  Redirects are never followed.

Addresses are normalised before the check: IPv4-mapped (``::ffff:a.b.c.d``),
IPv4-translated (``::ffff:0:a.b.c.d``), IPv4-compatible (``::a.b.c.d``), NAT64
(``64:ff9b::/96``) and 6to4 (``2002::/16``) forms are checked as the IPv4
address they carry.

``PROBE_ALLOWED_HOSTS`` (comma-separated host names, IP addresses or CIDR
networks) replaces the default, which is loopback and private addresses
(127/8, 10/8, 172.16/12, 192.168/16, ::1, fc00::/7).  Whatever the list says,
:data:`REFUSED_NETWORKS` (unspecified, link-local, multicast, broadcast and
reserved, tunnel forms whose IPv4 cannot be checked) and
:data:`METADATA_ADDRESSES` (cloud metadata services) are always refused.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from dataclasses import dataclass

from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

from planner.errors import ProbeError

__all__ = [
    "ALLOWED_HOSTS_ENV",
    "METADATA_ADDRESSES",
    "REFUSED_NETWORKS",
    "CheckedHost",
    "PinnedResolver",
    "allowed_hosts",
    "api_key_from",
    "check_address",
    "check_url_allowed",
    "normalise_address",
    "pin_urls",
    "resolve_allowed",
]

ALLOWED_HOSTS_ENV = "PROBE_ALLOWED_HOSTS"

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
IpAddr = ipaddress.IPv4Address | ipaddress.IPv6Address


def _nets(*cidrs: str) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(c) for c in cidrs)


# The default: loopback (RFC 1122, RFC 4291) and private (RFC 1918, unique-local RFC 4193).
DEFAULT_ALLOWED: tuple[Network, ...] = _nets("127.0.0.0/8", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16",
                                              "::1/128", "fc00::/7")

# Refused even when PROBE_ALLOWED_HOSTS lists them (checked on the normalised address).
REFUSED_NETWORKS: tuple[tuple[Network, str], ...] = (
    *((n, "unspecified ('this network')") for n in _nets("0.0.0.0/8", "::/128")),
    *((n, "link-local (where cloud metadata services live)") for n in _nets("169.254.0.0/16", "fe80::/10")),
    *((n, "multicast") for n in _nets("224.0.0.0/4", "ff00::/8")),
    # 240/4 is reserved (RFC 1112) and holds the limited broadcast 255.255.255.255
    *((n, "reserved or broadcast") for n in _nets("240.0.0.0/4")),
    # Teredo (RFC 4380) and local-use NAT64 (RFC 8215, any prefix length up to /96):
    # the IPv4 address they reach cannot be read off the address, so it cannot be checked
    *((n, "a tunnel or translation form whose IPv4 address cannot be checked")
      for n in _nets("2001::/32", "64:ff9b:1::/48")),
)

# Cloud metadata services, refused whatever the allow-list says.  The link-local
# ones are refused with 169.254/16 anyway; listed so the reason says what they are.
# Sources: the providers' documentation (AWS EC2 "Instance metadata service" IPv4
# and IPv6 endpoints, ECS task metadata v2, EKS Pod Identity Agent; Google Compute
# Engine metadata server IPv6 address; Microsoft Learn "What is IP address
# 168.63.129.16?"; Alibaba Cloud ECS instance metadata; Oracle Cloud Classic;
# Scaleway instance metadata), cross-checked against public SSRF block lists.
METADATA_ADDRESSES: frozenset[IpAddr] = frozenset(ipaddress.ip_address(a) for a in (
    "169.254.169.254",  # AWS, GCP, Azure IMDS, OpenStack, DigitalOcean, Oracle OCI, ...
    "169.254.170.2",  # AWS ECS task metadata / credentials
    "169.254.170.23",  # AWS EKS Pod Identity Agent
    "169.254.42.42",  # Scaleway
    "fd00:ec2::254",  # AWS IMDS over IPv6 (unique-local: "private" by range)
    "fd00:ec2::23",  # AWS EKS Pod Identity Agent over IPv6
    "fd20:ce::254",  # Google Compute Engine metadata server over IPv6
    "fd00:42::42",  # Scaleway over IPv6
    "100.100.100.200",  # Alibaba Cloud
    "192.0.0.192",  # Oracle Cloud Classic
    "168.63.129.16",  # Azure WireServer (host platform channel)
))

_NAT64 = ipaddress.ip_network("64:ff9b::/96")  # RFC 6052 well-known prefix
_MAPPED_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")  # RFC 2765 IPv4-translated
_COMPATIBLE = ipaddress.ip_network("::/96")  # deprecated IPv4-compatible (RFC 4291 2.5.5.1)


def normalise_address(addr: IpAddr) -> IpAddr:
    """The address a check must judge: the IPv4 address carried by an
    IPv4-mapped, -translated, -compatible, NAT64 or 6to4 IPv6 address, else itself."""
    if isinstance(addr, ipaddress.IPv4Address):
        return addr
    if addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    if addr.sixtofour is not None:
        return addr.sixtofour
    low = ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF)
    if addr in _NAT64 or addr in _MAPPED_TRANSLATED:
        return low
    if addr in _COMPATIBLE and int(addr) > 1:  # not :: (unspecified) or ::1 (loopback)
        return low
    return addr


def refusal_reason(addr: IpAddr) -> str | None:
    """Why ``addr`` is refused whatever the allow-list says, or None."""
    for a in dict.fromkeys((addr, normalise_address(addr))):
        if a in METADATA_ADDRESSES:
            return "a cloud metadata address"
        for net, why in REFUSED_NETWORKS:
            if a.version == net.version and a in net:
                return why
    return None


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
            names.append(_name_key(item))
    return tuple(names), tuple(nets)


def _in(addr: IpAddr, nets: tuple[Network, ...]) -> bool:
    return any(a.version == n.version and a in n for a in (addr, normalise_address(addr)) for n in nets)


def check_address(addr: IpAddr, *, host: str, rules: tuple[tuple[str, ...], tuple[Network, ...]] | None,
                  name_listed: bool = False) -> None:
    """Raise :class:`ProbeError` unless the probe may connect to ``addr``."""
    v4 = normalise_address(addr)
    if host == str(addr):  # an IP literal
        shown = f"address {addr}" + ("" if v4 == addr else f" (= {v4})")
    else:
        shown = f"host {host!r} ({addr}" + ("" if v4 == addr else f" = {v4}") + ")"
    why = refusal_reason(addr)
    if why is not None:
        raise ProbeError(f"url: {shown} is not allowed: {why}; refused even if {ALLOWED_HOSTS_ENV} lists it")
    if name_listed:
        return
    ok = _in(addr, DEFAULT_ALLOWED) if rules is None else _in(addr, rules[1])
    if not ok:
        where = "loopback and private addresses" if rules is None else f"{ALLOWED_HOSTS_ENV}"
        raise ProbeError(f"url: {shown} is not allowed; the probe only loads {where} "
                         f"(set {ALLOWED_HOSTS_ENV} to allow it)")


def _name_key(host: str) -> str:
    return host.lower().rstrip(".")


@dataclass(frozen=True)
class CheckedHost:
    """A URL's host, its port, and the checked addresses the probe may connect to
    (empty for an IP literal: the clients connect to the literal itself)."""

    host: str  # as aiohttp will ask for it (IDNA, lower case)
    port: int
    addresses: tuple[IpAddr, ...]


def _parse(url: str) -> tuple[str, int, IpAddr | None]:
    """(host as aiohttp sees it, port, the address if the host is an IP literal)."""
    try:
        u = URL(url)
    except (ValueError, TypeError):
        raise ProbeError("url: not a valid URL") from None
    if u.scheme not in ("http", "https"):
        raise ProbeError(f"url: expected http:// or https://, got {url.split('://')[0][:20]!r}")
    if u.raw_user or u.raw_password:
        raise ProbeError("url: credentials in the URL are not accepted; use --api-key-env")
    host = u.raw_host or ""
    if not host:
        raise ProbeError("url: no host")
    try:
        port = u.port or (443 if u.scheme == "https" else 80)
    except ValueError:
        raise ProbeError("url: invalid port") from None
    if ":" in host:  # aiohttp treats it as an IPv6 literal and connects to it as written
        if "%" in host:
            raise ProbeError("url: IPv6 zone ids are not accepted (scoped addresses are link-local)")
        try:
            return host, port, ipaddress.IPv6Address(host)
        except ValueError:
            raise ProbeError(f"url: host {host[:60]!r} is not a valid IPv6 address") from None
    if host.replace(".", "").isdigit():  # aiohttp treats it as an IPv4 literal, the OS may read it otherwise
        try:
            return host, port, ipaddress.IPv4Address(host)
        except ValueError:
            raise ProbeError(f"url: host {host[:60]!r} is not a dotted-quad IPv4 address (write it as a.b.c.d)"
                             ) from None
    return _name_key(host), port, None


def _resolve(host: str, port: int) -> tuple[IpAddr, ...]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise ProbeError(f"url: cannot resolve host {host[:80]!r} ({getattr(exc, 'strerror', None) or exc})"
                         ) from None
    out: list[IpAddr] = []
    for info in infos:
        text = str(info[4][0])
        if "%" in text:
            raise ProbeError(f"url: host {host!r} resolves to a scoped (link-local) address")
        addr = ipaddress.ip_address(text)
        if addr not in out:
            out.append(addr)
    if not out:
        raise ProbeError(f"url: host {host!r} resolves to no address")
    return tuple(out)


def resolve_allowed(url: str, *, allowed: str | None = None,
                    _known: dict[str, tuple[IpAddr, ...]] | None = None) -> CheckedHost:
    """Resolve ``url``'s host once and check every address; raise :class:`ProbeError`
    naming the first refused one.  A host name listed in ``PROBE_ALLOWED_HOSTS`` is
    still resolved, and its addresses still checked against the always-refused set."""
    host, port, literal = _parse(url)
    rules = allowed_hosts(allowed)
    if literal is not None:
        check_address(literal, host=host, rules=rules)
        return CheckedHost(host=host, port=port, addresses=())
    listed = rules is not None and host in rules[0]
    addrs = _known[host] if _known is not None and host in _known else _resolve(host, port)
    for addr in addrs:
        check_address(addr, host=host, rules=rules, name_listed=listed)
    return CheckedHost(host=host, port=port, addresses=addrs)


def pin_urls(urls: list[str] | tuple[str, ...], *, allowed: str | None = None) -> PinnedResolver:
    """Check every URL (each host name resolved once, however many URLs name it) and
    return the resolver that connects only to the checked addresses."""
    known: dict[str, tuple[IpAddr, ...]] = {}
    checked = []
    for url in urls:
        c = resolve_allowed(url, allowed=allowed, _known=known)
        if c.addresses:
            known[c.host] = c.addresses
        checked.append(c)
    return PinnedResolver(checked)


def check_url_allowed(url: str, *, allowed: str | None = None) -> str:
    """Return ``url`` if its host is allowed, else raise :class:`ProbeError`.

    ``allowed`` overrides ``PROBE_ALLOWED_HOSTS`` (same syntax).  A host name
    listed there is accepted without resolving it (the run resolves and checks
    it before connecting); any other name is resolved and every address must be
    allowed.  No connection is made.
    """
    host, _port, literal = _parse(url)
    rules = allowed_hosts(allowed)
    if literal is None and rules is not None and host in rules[0]:
        return url
    resolve_allowed(url, allowed=allowed)
    return url


class PinnedResolver(AbstractResolver):
    """aiohttp resolver that answers only with addresses already checked by
    :func:`resolve_allowed`; any other name is refused (no DNS query is made)."""

    def __init__(self, hosts: list[CheckedHost] | tuple[CheckedHost, ...] = ()) -> None:
        self._pins: dict[str, tuple[IpAddr, ...]] = {}
        for h in hosts:
            if h.addresses:
                self._pins[h.host] = tuple(dict.fromkeys(self._pins.get(h.host, ()) + h.addresses))

    @property
    def hosts(self) -> dict[str, tuple[IpAddr, ...]]:
        return dict(self._pins)

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        addrs = self._pins.get(_name_key(host))
        if addrs is None:
            raise OSError(f"host {host[:80]!r} was not checked against the allow-list; not connecting")
        out: list[ResolveResult] = []
        for a in addrs:
            fam = socket.AF_INET if a.version == 4 else socket.AF_INET6
            if family in (socket.AF_UNSPEC, fam):
                out.append(ResolveResult(hostname=host, host=str(a), port=port, family=fam, proto=0,
                                         flags=socket.AI_NUMERICHOST))
        if not out:
            raise OSError(f"host {host[:80]!r} has no checked address of the asked family")
        return out

    async def close(self) -> None:
        return None


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
