"""Which network destinations ``http_get`` may reach (SSRF protection).

A destination is refused unless every address its host resolves to is a public unicast
address. Loopback, private, link-local, carrier-grade NAT, multicast, reserved and unspecified
addresses are refused, and so are the cloud metadata endpoints (by address and by name) even
when private addresses are allowed. IPv4 addresses embedded in IPv6 (``::ffff:a.b.c.d``, NAT64,
6to4) are judged by the IPv4 address they carry.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from rar.tools.errors import URLRefusedError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], list[str]]

METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, ...
        "169.254.170.2",  # AWS ECS task metadata
        "fd00:ec2::254",  # AWS IMDS over IPv6
        "100.100.100.200",  # Alibaba Cloud
    )
)
METADATA_HOSTS = frozenset({"metadata.google.internal", "metadata.goog", "metadata"})
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def system_resolver(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (``getaddrinfo``), in the system's order."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise URLRefusedError(f"cannot resolve host {host!r}: {exc}", host=host) from None
    addresses: list[str] = []
    for _family, _type, _proto, _name, sockaddr in infos:
        address = str(sockaddr[0]).split("%", 1)[0]  # drop an IPv6 zone id
        if address not in addresses:
            addresses.append(address)
    return addresses


def embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (mapped, NAT64, 6to4), if any."""
    if isinstance(address, ipaddress.IPv4Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address.sixtofour


def address_problem(address: IPAddress, *, allow_private: bool) -> str | None:
    """Why ``address`` may not be contacted, or None when it may."""
    inner = embedded_ipv4(address)
    if inner is not None:
        problem = address_problem(inner, allow_private=allow_private)
        return f"{problem} (embedded in {address})" if problem else None
    if address in METADATA_ADDRESSES:
        return "a cloud metadata address"
    if address.is_unspecified:
        return "the unspecified address"
    if address.is_multicast:
        return "a multicast address"
    if allow_private and (address.is_loopback or address.is_private or address.is_link_local):
        return None
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_private:
        return "a private address"
    if address.is_reserved:
        return "a reserved address"
    if not address.is_global:
        return "not a public address"
    return None


@dataclass(frozen=True)
class Destination:
    """A checked destination: connect to ``address`` (never re-resolve ``host``)."""

    host: str
    port: int
    address: str
    addresses: tuple[str, ...]


@dataclass(frozen=True)
class NetworkPolicy:
    """Where requests may go.

    ``allow_private`` lets loopback, private and link-local addresses through (metadata
    endpoints stay refused). ``allow_hosts`` names single exceptions instead: ``"host"`` or
    ``"host:port"`` (IPv6 as ``"[::1]:8080"``), matched against the URL of every hop, so an
    allow-listed host cannot redirect to a neighbour that is not listed. ``resolver`` maps
    ``(host, port)`` to addresses (the system's ``getaddrinfo`` by default).
    """

    allow_private: bool = False
    allow_hosts: frozenset[str] = field(default_factory=frozenset)
    resolver: Resolver = system_resolver

    @classmethod
    def build(
        cls,
        *,
        allow_private: bool = False,
        allow_hosts: Iterable[str] = (),
        resolver: Resolver | None = None,
    ) -> NetworkPolicy:
        if isinstance(allow_hosts, str):
            allow_hosts = [allow_hosts]
        hosts = frozenset(h.strip().lower() for h in allow_hosts if h.strip())
        return cls(allow_private, hosts, resolver or system_resolver)

    def _allow_listed(self, host: str, port: int) -> bool:
        shown = f"[{host}]" if ":" in host else host
        return bool(self.allow_hosts & {shown, f"{shown}:{port}", host})

    def check(self, host: str, port: int) -> Destination:
        """Resolve ``host`` and check every address; raise :class:`URLRefusedError` if refused."""
        host = host.lower().rstrip(".")
        if not host:
            raise URLRefusedError("the URL has no host")
        if host in METADATA_HOSTS:
            raise URLRefusedError(f"{host!r} is a cloud metadata endpoint", host=host)
        private_ok = self.allow_private or self._allow_listed(host, port)
        try:
            addresses = [str(ipaddress.ip_address(host))]  # a literal: no lookup at all
            literal = True
        except ValueError:
            addresses = self.resolver(host, port)
            literal = False
        if not addresses:
            raise URLRefusedError(f"host {host!r} resolves to no address", host=host)
        for text in addresses:
            try:
                address = ipaddress.ip_address(text)
            except ValueError:
                raise URLRefusedError(
                    f"host {host!r} resolved to {text!r}, not an IP address", host=host
                ) from None
            problem = address_problem(address, allow_private=private_ok)
            if problem:
                what = text if literal else f"it resolves to {text}, which"
                raise URLRefusedError(
                    f"refused {host!r}: {what} is {problem}; http_get only contacts public "
                    "addresses",
                    host=host,
                    address=text,
                )
        return Destination(host, port, addresses[0], tuple(addresses))
