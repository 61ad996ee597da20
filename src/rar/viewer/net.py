"""Where the viewer listens: loopback by default, a warning for anything else."""

from __future__ import annotations

import ipaddress

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (``127.0.0.0/8``, ``::1``)."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def host_warning(host: str) -> str | None:
    """The warning to print before binding ``host``, or None for a loopback address."""
    if is_loopback(host):
        return None
    return (
        f"warning: listening on {host}, not on a loopback address: anyone who can reach this "
        "machine can read the run store (goals, prompts, results, artifacts). "
        "The viewer has no authentication; use --host 127.0.0.1 unless that is what you want."
    )
