"""The environment fingerprint recorded in every manifest.

It answers "what did this run execute on?" well enough for a replay report to name what changed:
Python, platform, RAR's version, the versions of the packages RAR and agents commonly depend on,
a digest over every installed distribution, and the git commit of the working directory.
Nothing identifying a person or a secret is recorded (no host name, user name or environment).
"""

from __future__ import annotations

import functools
import platform
import subprocess
import sys
from importlib import metadata
from typing import Any

from rar._version import __version__
from rar.hashing import digest_value

KEY_PACKAGES = (
    "pydantic",
    "orjson",
    "rfc8785",
    "zstandard",
    "click",
    "rich",
    "numpy",
    "scipy",
    "openai",
    "anthropic",
    "google-genai",
    "httpx",
    "httpx2",
)


@functools.cache
def environment_fingerprint() -> dict[str, Any]:
    distributions = sorted(
        {
            f"{(dist.metadata['Name'] or '').lower()}=={dist.version}"
            for dist in metadata.distributions()
            if dist.metadata["Name"]
        }
    )
    packages = {}
    for name in KEY_PACKAGES:
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return {
        "python": platform.python_version(),
        "implementation": sys.implementation.name,
        "platform": f"{platform.system()}-{platform.release()}",
        "machine": platform.machine(),
        "rar": __version__,
        "packages": packages,
        "distributions": {"count": len(distributions), "digest": digest_value(distributions)},
        "git": _git_state(),
    }


def _git_state() -> dict[str, Any] | None:
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit, "dirty": bool(dirty)} if commit else None
