"""The environment fingerprint recorded in every manifest.

It answers "what did this run execute on?" well enough for a replay report to name what changed:
Python, platform, RAR's version, the versions of the packages RAR and agents commonly depend on,
a digest over every installed distribution, and the git commit of the working directory.
Nothing identifying a person or a secret is recorded (no host name, user name or environment).

Reading every installed distribution's metadata costs about half a second, on every start of a
process that records a run. That part (the distributions' digest and the key packages'
versions) is cached per environment in :func:`cache_dir` (``fingerprint-<key>.json``), keyed by
what changes whenever a package is installed, upgraded or removed: the interpreter
(``sys.prefix``, ``sys.executable``, its version), and, in ``sys.path`` order, every zip or egg
file on it and every directory on it holding distributions, with its inode and the name, inode,
mtime and size of every ``*.dist-info`` / ``*.egg-info`` / ``*.egg-link`` / ``*.pth`` / ``*.egg``
entry in it. Installing or removing a distribution creates or removes such an entry; an upgrade
replaces it (a new name or inode), and rewriting files inside one changes its mtime. An entry
changed within the last two seconds is not trusted (the clock's granularity could hide a second
change), so nothing is cached then. The rest (Python, platform, RAR's version, git state) is
read live every time.
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import orjson

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


ENV_CACHE_DIR = "RAR_CACHE_DIR"
_CACHE_VERSION = 1
_RACY_NS = 2_000_000_000
_DIST_SUFFIXES = (".dist-info", ".egg-info", ".egg-link", ".pth", ".egg")


def cache_dir() -> Path | None:
    """RAR's per-user cache directory (``$RAR_CACHE_DIR``, else ``$XDG_CACHE_HOME/rar``, else
    ``~/.cache/rar``), created private to the user; None when it cannot be used."""
    env = os.environ.get(ENV_CACHE_DIR)
    if env:
        path = Path(env)
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        path = Path(base) / "rar"
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = path.stat()
    except OSError:
        return None
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return None  # another user's directory: never read what they could have written
    return path if os.access(path, os.W_OK | os.X_OK) else None


def environment_key() -> str | None:
    """A digest of what changes when the installed packages change (see the module docstring);
    None when a distribution's entry changed too recently to be trusted."""
    now = time.time_ns()
    parts: list[Any] = [_CACHE_VERSION, sys.prefix, sys.executable, sys.version]
    for entry in sys.path:
        where = entry or "."
        try:
            st = os.stat(where)
        except OSError:
            parts.append([entry, None])
            continue
        if not os.path.isdir(where):  # a zip or egg file on the path
            parts.append([entry, st.st_ino, st.st_size, st.st_mtime_ns])
            continue
        found = []
        try:
            with os.scandir(where) as listing:
                for item in listing:
                    if item.name.endswith(_DIST_SUFFIXES):
                        info = item.stat(follow_symlinks=False)
                        if now - info.st_mtime_ns < _RACY_NS:
                            return None
                        found.append((item.name, info.st_ino, info.st_mtime_ns, info.st_size))
        except OSError:
            found = [("<unreadable>", 0, 0, 0)]
        if found:
            # in sys.path order (the first of two copies of a package is the one imported);
            # the directory's own mtime, and directories holding no distribution (the current
            # directory, src/), are left out: they change all the time, the distributions in
            # them are what matters
            found.sort()
            parts.append([entry, st.st_ino, found])
    return hashlib.sha256(orjson.dumps(parts)).hexdigest()[:32]


def _installed() -> dict[str, Any]:
    """The expensive part: every distribution's name and version, and the key packages'."""
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
        "packages": packages,
        "distributions": {"count": len(distributions), "digest": digest_value(distributions)},
    }


def installed_packages() -> dict[str, Any]:
    """``_installed()``, from the per-environment cache when the environment is unchanged."""
    key = environment_key()
    folder = cache_dir() if key is not None else None
    path = folder / f"fingerprint-{key}.json" if folder is not None else None
    if path is not None:
        try:
            cached = orjson.loads(path.read_bytes())
            if cached.get("key") == key and isinstance(cached.get("installed"), dict):
                return dict(cached["installed"])
        except (OSError, orjson.JSONDecodeError, AttributeError):
            pass
    installed = _installed()
    if path is not None and environment_key() == key:  # nothing changed while reading
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        try:
            tmp.write_bytes(orjson.dumps({"key": key, "installed": installed}))
            os.replace(tmp, path)
        except OSError:
            tmp.unlink(missing_ok=True)
    return installed


@functools.cache
def environment_fingerprint() -> dict[str, Any]:
    installed = installed_packages()
    return {
        "python": platform.python_version(),
        "implementation": sys.implementation.name,
        "platform": f"{platform.system()}-{platform.release()}",
        "machine": platform.machine(),
        "rar": __version__,
        "packages": installed["packages"],
        "distributions": installed["distributions"],
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
