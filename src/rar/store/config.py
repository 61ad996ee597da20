"""Where a store keeps its blobs and its index, when not in its own directory.

A store's run directories (manifests and event logs) always live under its root. Two parts may
live elsewhere, so that a store can outgrow one disk and be shared by many workers:

* **blobs** on any fsspec URL (``file://``, ``s3://``, ``gs://`` ...), see ``rar.store.remote``;
* **the index** on PostgreSQL (``postgresql://host:port/db``), see ``rar.store.index_pg``.

The setting is read from the environment (``RAR_BLOBS_URL``, ``RAR_INDEX_URL``), else from the
store's ``store.json``::

    {"format": 1, "blobs": "s3://bucket/prefix", "blobs_options": {"endpoint_url": "..."},
     "index": "postgresql://rar@db.example:5432/rar", "store_id": "<32 hex digits>"}

``store_id`` keys the store's rows in a database that may hold several stores' indexes.

``store.json`` is written once, when a store is first given a remote part, so that every process
opening the store agrees on where its parts are; the environment may repeat it but not contradict
it. Credentials are never part of a URL: a URL with a password is refused (S3 keys come from the
usual ``AWS_*`` variables or files, PostgreSQL passwords from ``PGPASSWORD`` or ``~/.pgpass``).
"""

from __future__ import annotations

import fcntl
import os
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qsl, urlsplit

import orjson

from rar.errors import ConfigError

CONFIG_NAME: Final = "store.json"
ENV_BLOBS: Final = "RAR_BLOBS_URL"
ENV_INDEX: Final = "RAR_INDEX_URL"
_FORMAT: Final = 1
_STORE_ID: Final = re.compile(r"[0-9a-f]{32}")


@dataclass(frozen=True)
class StoreConfig:
    blobs: str | None = None  # an fsspec URL; None: the store's own blobs/packs
    blobs_options: dict[str, Any] = field(default_factory=dict)  # non-secret fsspec options
    index: str | None = None  # a postgresql:// URL; None: the store's own index.sqlite
    # the store's identity in a shared index database (its rows there are keyed by it);
    # written with the index URL on first use, see ensure_store_id
    store_id: str | None = None

    @property
    def is_local(self) -> bool:
        return self.blobs is None and self.index is None

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"format": _FORMAT}
        if self.blobs is not None:
            out["blobs"] = self.blobs
            if self.blobs_options:
                out["blobs_options"] = self.blobs_options
        if self.index is not None:
            out["index"] = self.index
        if self.store_id is not None:
            out["store_id"] = self.store_id
        return out


def check_url(url: str, *, what: str, variable: str) -> str:
    """``url`` when it names no password; else a ConfigError saying where credentials go."""
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise ConfigError(f"{variable}: {what} URL {url!r} cannot be parsed ({exc})") from None
    if not parts.scheme:
        raise ConfigError(
            f"{variable}: {what} URL {url!r} has no scheme; write e.g. s3://bucket/prefix, "
            "file:///path or postgresql://host/db"
        )
    if parts.password is not None or _names_password(parts.query):
        where = (
            "PGPASSWORD or ~/.pgpass"
            if parts.scheme.startswith("postgres")
            else "the storage's own variables or files (for S3: AWS_ACCESS_KEY_ID / "
            "AWS_SECRET_ACCESS_KEY or ~/.aws/credentials)"
        )
        raise ConfigError(
            f"{variable}: {what} URL names a password; RAR never stores credentials. Remove it "
            f"from the URL and give it through {where}"
        )
    return url


def _names_password(query: str) -> bool:
    """Whether a URL's query names a password (libpq reads ``?password=...`` too)."""
    return any(key.strip().lower() == "password" for key, _ in parse_qsl(query, True))


def _read_file(root: Path) -> dict[str, Any]:
    path = root / CONFIG_NAME
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"{path} cannot be read ({exc.strerror or exc})") from None
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ConfigError(f"{path} is not valid JSON ({exc}); fix or remove it") from None
    if not isinstance(data, dict) or data.get("format") != _FORMAT:
        raise ConfigError(f"{path} is not a RAR store configuration (format {_FORMAT} expected)")
    return data


def load_config(root: Path, environ: dict[str, str] | None = None) -> StoreConfig:
    """The store's configuration: ``store.json`` with the environment's settings checked
    against it (a contradiction is a ConfigError naming both)."""
    env = os.environ if environ is None else environ
    data = _read_file(root)
    values: dict[str, Any] = {}
    for key, variable, what in (("blobs", ENV_BLOBS, "blob"), ("index", ENV_INDEX, "index")):
        stored = data.get(key)
        given = env.get(variable) or None
        if (
            stored is not None
            and given is not None
            and given.rstrip("/") != str(stored).rstrip("/")
        ):
            raise ConfigError(
                f"{variable} is {given!r} but the store {root} keeps its {what}s at {stored!r} "
                f"({root / CONFIG_NAME}); unset {variable} or use another store"
            )
        value = stored if stored is not None else given
        values[key] = None if value is None else check_url(str(value), what=what, variable=variable)
    options = data.get("blobs_options") or {}
    if not isinstance(options, dict):
        raise ConfigError(f"{root / CONFIG_NAME}: blobs_options must be an object")
    store_id = data.get("store_id")
    if store_id is not None and not (isinstance(store_id, str) and _STORE_ID.fullmatch(store_id)):
        raise ConfigError(
            f"{root / CONFIG_NAME}: store_id must be 32 lowercase hex digits, not {store_id!r}"
        )
    return StoreConfig(
        blobs=values["blobs"],
        blobs_options=dict(options),
        index=values["index"],
        store_id=store_id,
    )


def ensure_store_id(root: Path) -> str:
    """The store's id, drawn and written into ``store.json`` (with the rest of its
    configuration) on first use; processes starting at once agree on one."""
    config = load_config(root)
    if config.store_id is None:

        def with_id(current: StoreConfig) -> StoreConfig:
            if current.store_id is not None:
                return current
            # nondeterminism-ok: a store's identity, not agent logic
            return replace(current, store_id=secrets.token_hex(16))

        config = update_config(root, with_id)
    assert config.store_id is not None
    return config.store_id


def update_config(root: Path, change: Callable[[StoreConfig], StoreConfig]) -> StoreConfig:
    """Read ``store.json`` (with the environment's settings), apply ``change`` and write the
    result when it differs from the file, all under an advisory ``flock`` on the store's
    directory, so that processes writing it at once never undo each other's settings (a store
    id, a blob URL). Returns the configuration written (or found)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        current = load_config(root)
        updated = change(current)
        if updated.as_json() != _read_file(root):
            save_config(root, updated)
        return updated
    finally:
        os.close(fd)  # releases the lock


def save_config(root: Path, config: StoreConfig) -> None:
    """Write ``store.json`` (durably: tmp, fsync, rename). Nothing to write for a local store."""
    if config.is_local:
        return
    from rar.store._fs import fsync_dir

    path = root / CONFIG_NAME
    tmp = path.with_name(f".{CONFIG_NAME}.{os.getpid()}.tmp")
    data = orjson.dumps(config.as_json(), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
    with open(tmp, "wb") as handle:
        handle.write(data + b"\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    fsync_dir(root)
