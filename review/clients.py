"""The address a request comes from (the sign-in throttle, the audit log) and whether it came over TLS.

Without ``PAL_TRUST_PROXY`` it is the TCP peer. Behind a reverse proxy every visitor's peer is the proxy, so
``PAL_TRUST_PROXY=1`` (a proxy on this host: the loopback addresses) or ``PAL_TRUST_PROXY=10.0.0.5,127.0.0.1``
(the proxies' addresses) says whose ``X-Forwarded-For`` to believe — and only its **rightmost** entry, the one the
proxy itself added: entries to its left came from the visitor and can say anything. A request whose peer is not a
trusted proxy (the app reached directly) keeps its peer address, whatever headers it sends.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping

LOOPBACK = ("127.0.0.1", "::1")


def trusted_proxies(env: Mapping[str, str] | None = None) -> set[str]:
    env = os.environ if env is None else env
    raw = (env.get("PAL_TRUST_PROXY") or "").strip()
    if not raw or raw == "0":
        return set()
    if raw == "1":
        return set(LOOPBACK)
    return {_normal(p) for p in raw.split(",") if p.strip()}


def _normal(address: str) -> str:
    address = address.strip().strip("[]")
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    mapped = getattr(ip, "ipv4_mapped", None)
    return str(mapped or ip)


def from_trusted_proxy(peer: str | None, env: Mapping[str, str] | None = None) -> bool:
    return peer is not None and _normal(peer) in trusted_proxies(env)


def client_address(peer: str | None, forwarded_for: str | None, env: Mapping[str, str] | None = None) -> str | None:
    """The visitor's address: the rightmost ``X-Forwarded-For`` hop when ``peer`` is a trusted proxy, else ``peer``."""
    if from_trusted_proxy(peer, env) and forwarded_for and forwarded_for.strip():
        hop = forwarded_for.split(",")[-1].strip()
        if hop:
            return _normal(hop)
    return _normal(peer) if peer else None


def over_tls(scheme: str | None, peer: str | None, forwarded_proto: str | None,
             env: Mapping[str, str] | None = None) -> bool:
    """Whether the visitor's connection is HTTPS: the request's own scheme, or a trusted proxy's
    ``X-Forwarded-Proto`` (its rightmost value)."""
    if scheme == "https":
        return True
    if from_trusted_proxy(peer, env) and forwarded_proto:
        return forwarded_proto.split(",")[-1].strip().lower() == "https"
    return False
