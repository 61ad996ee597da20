"""Blobs on any fsspec URL (``s3://``, ``gs://``, ``file://`` ...): packs staged on the local
disk, uploaded when sealed, read back by byte range.

Object stores have no append, and a blob must be durable before the event naming it, so a
writer keeps writing its pack exactly as in a local store (``<store>/blobs/packs/<name>.pack``,
fsynced before the events that name its blobs). When the pack is sealed (its writer closes) it
is uploaded whole to ``<url>/packs/<name>.pack`` and the copy is confirmed (its size, and its
MD5 ETag or else its bytes read back); only a confirmed copy lets the local one be removed
(``rar store push --drop-local``). The index keeps the same ``(pack, offset)`` locations.

Reads use the local copy when there is one, else a byte-range read of the object, verified like
a local read (the raw bytes re-hashed). A sealed object never changes, so small ones are cached
whole in memory (one request per pack, then none).

Crashes: a writer killed before its upload leaves its pack (sealed or torn) on the local disk,
where reads still find it. The next writer's close uploads every pack whose run nobody is
writing, as does ``rar store push``; ``rar verify`` lists such packs as ``not-uploaded``
warnings (it changes nothing, here or remotely). A torn tail is uploaded as is: readers and
verify treat it as in a local pack. An object is never overwritten: a name that exists with
other bytes is an error, never a silent replacement.

Credentials never pass through RAR: the URL may not name a password (see
:mod:`rar.store.config`), ``blobs_options`` may not hold secrets, and fsspec's backends read
keys from their usual places (for S3: ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY``,
``~/.aws/credentials``). fsspec is imported only when a remote blob is first touched.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
import shutil
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

from rar.errors import ConfigError, CorruptionError, StoreError
from rar.store._fs import fsync_dir, make_dirs
from rar.store.blobs import (
    _HEADER,
    HEADER_SIZE,
    BlobLocation,
    PackReader,
    PackRecord,
    PackScan,
    digest_of,
)
from rar.store.config import CONFIG_NAME, ENV_BLOBS, load_config
from rar.store.lock import is_locked

PACKS_DIR: Final = "packs"
_WHOLE_LIMIT: Final = 8 << 20  # objects up to this size are fetched whole once, then cached
_CACHE_BUDGET: Final = 64 << 20  # bytes of sealed objects kept in memory at most
_CHUNK: Final = 1 << 20
_SECRET_KEYS: Final = frozenset(
    {"key", "access_key", "access_key_id", "aws_access_key_id", "account_key", "sas_token"}
)
_SECRET_WORDS: Final = ("secret", "password", "passwd", "token", "credential", "private")
_UNREACHABLE: Final = frozenset(
    {
        "EndpointConnectionError",
        "ConnectTimeoutError",
        "ReadTimeoutError",
        "ClientConnectorError",
        "ServerDisconnectedError",
        "ClientOSError",
    }
)
_NO_CREDENTIALS: Final = frozenset(
    {"NoCredentialsError", "PartialCredentialsError", "CredentialRetrievalError"}
)
_MD5: Final = re.compile(r"[0-9a-f]{32}")
_CHECKED: set[str] = set()  # blob URLs this process could write to
_CHECKED_LOCK = threading.Lock()


class RemoteBlobsError(StoreError):
    """The blob location in the store's configuration cannot be used (no credentials, a
    missing bucket, an unreachable server, a copy that does not match). Names the URL, never a
    credential, and says what to do."""


def check_options(options: dict[str, Any], where: str) -> dict[str, Any]:
    """``options`` when no key names a secret (recursively); else a ConfigError."""
    stack: list[tuple[str, Any]] = [("", options)]
    while stack:
        prefix, value = stack.pop()
        if not isinstance(value, dict):
            continue
        for key, item in value.items():
            name = str(key).lower()
            if name in _SECRET_KEYS or any(word in name for word in _SECRET_WORDS):
                raise ConfigError(
                    f"{where}: blobs_options.{prefix}{key} would hold a credential; RAR never "
                    "stores credentials. Remove it and give it through the storage's own "
                    "variables or files (for S3: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or "
                    "~/.aws/credentials)"
                )
            stack.append((f"{prefix}{key}.", item))
    return options


class RemoteBlobs:
    """The packs at one fsspec URL: list, read by range, upload and confirm."""

    def __init__(self, url: str, options: dict[str, Any] | None = None) -> None:
        self.url = url.rstrip("/")
        self.scheme = urlsplit(url).scheme.lower()
        self.options = check_options(dict(options or {}), self.url)
        self._fs: Any = None
        self._base = ""
        self._mutex = threading.Lock()
        self._cache: OrderedDict[str, bytes] = OrderedDict()
        self._cached = 0
        self._sizes: dict[str, int] = {}  # sealed objects never change

    def __repr__(self) -> str:
        return f"RemoteBlobs({self.url!r})"

    @property
    def is_local(self) -> bool:
        """A ``file://`` URL: copied durably by RAR itself (fsync, rename, fsync)."""
        return self.scheme in ("file", "local")

    @property
    def fs(self) -> Any:
        if self._fs is None:
            try:
                import fsspec
            except ImportError:
                raise RemoteBlobsError(
                    f"the store keeps its blobs at {self.url}, which needs fsspec: "
                    "pip install 'rar[s3]' (or fsspec and the backend for your URL)"
                ) from None
            options = dict(self.options)
            if self.is_local:
                options.setdefault("auto_mkdir", True)
            try:
                fs, base = fsspec.core.url_to_fs(self.url, **options)
            except ImportError as exc:
                raise RemoteBlobsError(
                    f"the store keeps its blobs at {self.url}, but the fsspec backend for "
                    f"{self.scheme}:// is not installed ({exc}); install it (for S3: "
                    "pip install 'rar[s3]')"
                ) from None
            except (TypeError, ValueError) as exc:
                raise ConfigError(
                    f"blobs at {self.url}: blobs_options are not accepted by fsspec ({exc})"
                ) from None
            self._fs, self._base = fs, str(base).rstrip("/")
        return self._fs

    def object_path(self, name: str) -> str:
        self.fs  # noqa: B018 - sets _base
        return f"{self._base}/{PACKS_DIR}/{name}.pack"

    def object_url(self, name: str) -> str:
        return f"{self.url}/{PACKS_DIR}/{name}.pack"

    # --- errors ----------------------------------------------------------------------------

    def error(self, exc: BaseException, doing: str) -> RemoteBlobsError:
        """A one-line error naming the URL and what to do (``doing``: "read", "upload to" ...)."""
        names = {cls.__name__ for cls in type(exc).__mro__}
        text = " ".join(str(exc).split())[:200]
        if names & _NO_CREDENTIALS:
            why = (
                "no credentials were found. Give them through the storage's own variables or "
                "files (for S3: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or ~/.aws/credentials); "
                "never in the URL or store.json"
            )
        elif isinstance(exc, PermissionError) or any(
            code in text for code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied")
        ):
            why = f"access was refused ({text}). Check the credentials and their permissions"
        elif isinstance(exc, FileNotFoundError):
            why = (
                f"it does not exist ({text}). Create the bucket or directory (for S3: "
                "aws s3 mb s3://BUCKET), or correct RAR_BLOBS_URL / the store's store.json"
            )
        elif names & _UNREACHABLE or isinstance(exc, ConnectionError | TimeoutError):
            why = (
                f"the storage server cannot be reached ({text}). Is it running? Check the "
                "endpoint (blobs_options.endpoint_url in store.json, or AWS_ENDPOINT_URL)"
            )
        else:
            why = f"{type(exc).__name__}: {text}"
        return RemoteBlobsError(f"cannot {doing} blobs at {self.url}: {why}")

    @contextlib.contextmanager
    def _calling(self, doing: str) -> Iterator[None]:
        try:
            yield
        except (RemoteBlobsError, ConfigError):
            raise
        except Exception as exc:
            raise self.error(exc, doing) from None

    # --- reading ---------------------------------------------------------------------------

    def list_packs(self) -> dict[str, int]:
        """Every pack object's name and size (one listing, never from a cache)."""
        path = f"{self.object_path('x').rsplit('/', 1)[0]}"
        with self._calling("list the"):
            try:
                entries = self.fs.ls(path, detail=True, refresh=True)
            except FileNotFoundError as exc:
                if "bucket" in str(exc).lower():
                    raise
                entries = []  # nothing uploaded yet
        found: dict[str, int] = {}
        for entry in entries:
            name = str(entry.get("name", "")).rsplit("/", 1)[-1]
            if entry.get("type") == "file" and name.endswith(".pack"):
                found[name[: -len(".pack")]] = int(entry["size"])
        self._sizes.update(found)
        return found

    def size(self, name: str, *, fresh: bool = False) -> int | None:
        """The object's size; None when there is no such object."""
        if not fresh and name in self._sizes:
            return self._sizes[name]
        with self._calling("read the"):
            try:
                info = self.fs.info(self.object_path(name))
            except FileNotFoundError as exc:
                if "bucket" in str(exc).lower():
                    raise
                return None
        size = int(info["size"])
        self._sizes[name] = size
        return size

    def read_at(self, name: str, offset: int, size: int) -> bytes:
        """``size`` bytes at ``offset`` of a pack object (FileNotFoundError when there is none)."""
        total = self.size(name)
        if total is None:
            raise FileNotFoundError(self.object_url(name))
        if total <= _WHOLE_LIMIT:
            return self._whole(name)[offset : offset + size]
        with self._calling("read the"):
            data: bytes = self.fs.cat_file(
                self.object_path(name), start=offset, end=min(offset + size, total)
            )
        return data

    def read_from(self, name: str, start: int = 0) -> bytes:
        """The object's bytes from ``start`` on."""
        total = self.size(name)
        if total is None:
            raise FileNotFoundError(self.object_url(name))
        if total <= _WHOLE_LIMIT:
            return self._whole(name)[start:]
        with self._calling("read the"):
            data: bytes = self.fs.cat_file(self.object_path(name), start=start)
        return data

    def _whole(self, name: str) -> bytes:
        with self._mutex:
            data = self._cache.get(name)
            if data is not None:
                self._cache.move_to_end(name)
                return data
        with self._calling("read the"):
            try:
                data = bytes(self.fs.cat_file(self.object_path(name)))
            except FileNotFoundError as exc:
                if "bucket" in str(exc).lower():
                    raise
                self._sizes.pop(name, None)
                raise FileNotFoundError(self.object_url(name)) from None
        with self._mutex:
            self._cache[name] = data
            self._cached += len(data)
            while self._cached > _CACHE_BUDGET and len(self._cache) > 1:
                _, dropped = self._cache.popitem(last=False)
                self._cached -= len(dropped)
        return data

    def forget(self, name: str) -> None:
        """Drop what is cached of an object (verify reads it afresh)."""
        with self._mutex:
            data = self._cache.pop(name, None)
            if data is not None:
                self._cached -= len(data)
        self._sizes.pop(name, None)

    # --- writing ---------------------------------------------------------------------------

    def check_writable(self) -> None:
        """Raise RemoteBlobsError unless an object can be written (and removed) at the URL;
        checked once per process and URL, before a run records anything."""
        with _CHECKED_LOCK:
            if self.url in _CHECKED:
                return
        probe = f"{self._base_path()}/.rar-probe-{os.getpid()}-{secrets.token_hex(4)}"
        with self._calling("write to the"):
            self.fs.pipe_file(probe, b"rar write probe\n")
            self.fs.rm_file(probe)
        with _CHECKED_LOCK:
            _CHECKED.add(self.url)

    def _base_path(self) -> str:
        self.fs  # noqa: B018 - sets _base
        return self._base

    def upload(self, local: Path, name: str) -> bool:
        """Copy a sealed local pack to its object and confirm the copy. False when the object
        held it already; an object of another size is never overwritten (RemoteBlobsError)."""
        size = local.stat().st_size
        present = self.size(name, fresh=True)
        if present == size:
            return False
        if present is not None:
            raise RemoteBlobsError(
                f"pack {name}: {self.object_url(name)} has {present} bytes but the local copy "
                f"{local} has {size}; the object is not overwritten. Run `rar verify` to see "
                "which one is damaged"
            )
        with self._calling("upload to the"):
            if self.is_local:
                _durable_copy(local, Path(self.object_path(name)))
            else:
                self.fs.put_file(str(local), self.object_path(name))
        self.forget(name)
        self.confirm(local, name)
        return True

    def confirm(self, local: Path, name: str) -> None:
        """Raise RemoteBlobsError unless the object holds exactly the local pack's bytes: its
        size, then its MD5 ETag where the store gives one, else its bytes read back."""
        with self._calling("read the"):
            info = self.fs.info(self.object_path(name))
        size = local.stat().st_size
        if int(info["size"]) != size:
            raise RemoteBlobsError(
                f"pack {name}: {self.object_url(name)} has {info['size']} bytes after the "
                f"upload, the local copy {size}; the local copy is kept"
            )
        etag = str(info.get("ETag") or info.get("etag") or "").strip('"').lower()
        if _MD5.fullmatch(etag) and _file_digest(local, "md5") == etag:
            return
        remote = hashlib.sha256()
        with self._calling("read the"), self.fs.open(self.object_path(name), "rb") as handle:
            while chunk := handle.read(_CHUNK):
                remote.update(chunk)
        if remote.hexdigest() != _file_digest(local, "sha256"):
            raise RemoteBlobsError(
                f"pack {name}: {self.object_url(name)} does not hold the bytes of the local "
                f"copy {local}; the local copy is kept"
            )


def _file_digest(path: Path, algorithm: str) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, algorithm).hexdigest()


def _durable_copy(source: Path, target: Path) -> None:
    """Copy to a temporary name, fsync, rename, fsync the directory: never a partial object."""
    make_dirs(target.parent)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        shutil.copyfile(source, tmp)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(target.parent)


# --- the reader --------------------------------------------------------------------------------


class RemotePackReader(PackReader):
    """A :class:`PackReader` that reads a pack from its object when there is no local copy."""

    def __init__(self, packs_dir: Path, remote: RemoteBlobs) -> None:
        super().__init__(packs_dir)
        self.remote = remote

    def is_local(self, name: str) -> bool:
        return os.path.lexists(self.pack_path(name))

    def where(self, name: str) -> str:
        """The local copy's path, else the object's URL (for messages and reports)."""
        return str(self.pack_path(name)) if self.is_local(name) else self.remote.object_url(name)

    def pack_size(self, name: str) -> int:
        try:
            return self.pack_path(name).stat().st_size
        except FileNotFoundError:
            size = self.remote.size(name)
            if size is None:
                raise
            return size

    def read(self, digest: str, location: BlobLocation, *, verify: bool = True) -> bytes:
        if location.pack in self._files or self.is_local(location.pack):
            with contextlib.suppress(FileNotFoundError):  # dropped meanwhile: read the object
                return super().read(digest, location, verify=verify)
        url = self.remote.object_url(location.pack)
        length = HEADER_SIZE + location.stored_size
        record = self.remote.read_at(location.pack, location.offset, length)
        if len(record) != length:
            raise CorruptionError(f"blob {digest} is cut short in {url}")
        marker, raw_digest, codec, raw_size, stored_size = _HEADER.unpack_from(record)
        if marker != b"B" or raw_digest.hex() != digest[7:] or stored_size != location.stored_size:
            raise CorruptionError(f"blob {digest}: its record header in {url} is damaged")
        raw = self._decode(codec, record[HEADER_SIZE:], raw_size, digest, Path(url))
        if verify and digest_of(raw) != digest:
            raise CorruptionError(f"blob {digest} in {url} does not match its digest")
        return raw

    def scan(self, name: str, start: int = 0) -> PackScan:
        if self.is_local(name):
            return super().scan(name, start)
        return self._scan_bytes(name, self.remote.read_from(name, start), start, base=start)

    def verify_pack(
        self, name: str, start: int = 0
    ) -> tuple[PackScan, list[tuple[PackRecord, str]]]:
        if self.is_local(name):
            return super().verify_pack(name, start)
        return verify_object(self.remote, name, start)

    def iter_pack_names(self, *, logs: bool = True) -> Iterator[str]:
        local = list(super().iter_pack_names(logs=False))
        yield from local
        known = set(local)
        yield from sorted(name for name in self.remote.list_packs() if name not in known)
        if logs:
            from rar.store import _carried

            yield from _carried.iter_log_packs(self.runs_root)


def verify_object(
    remote: RemoteBlobs, name: str, start: int = 0
) -> tuple[PackScan, list[tuple[PackRecord, str]]]:
    """:meth:`PackReader.verify_pack` of an object, read afresh: its bytes are checked by the
    same code as a local pack's, from a private temporary file (sparse before ``start``)."""
    remote.forget(name)
    data = remote.read_from(name, start)
    with tempfile.TemporaryDirectory(prefix="rar-verify-") as tmp:
        copy = Path(tmp) / f"{name}.pack"
        with open(copy, "wb") as handle:
            handle.seek(start)
            handle.write(data)
        scan, failures = PackReader(Path(tmp)).verify_pack(name, start)
    url = remote.object_url(name)
    return scan, [(record, why.replace(str(copy), url)) for record, why in failures]


def pack_size(reader: PackReader, name: str) -> int:
    """A pack's size, wherever it is (FileNotFoundError when it is nowhere)."""
    if isinstance(reader, RemotePackReader):
        return reader.pack_size(name)
    return reader.pack_path(name).stat().st_size


def pack_where(reader: PackReader, name: str) -> str:
    """A pack's local path, or its object's URL when only the remote copy exists."""
    if isinstance(reader, RemotePackReader):
        return reader.where(name)
    return str(reader.pack_path(name))


def open_reader(root: Path, packs_dir: Path) -> PackReader:
    """The store's pack reader: remote-aware when its configuration names a blob URL."""
    if not os.environ.get(ENV_BLOBS) and not (root / CONFIG_NAME).exists():
        return PackReader(packs_dir)  # the common case, without parsing anything
    config = load_config(root)
    if config.blobs is None:
        return PackReader(packs_dir)
    return RemotePackReader(packs_dir, RemoteBlobs(config.blobs, config.blobs_options))


# --- pushing ------------------------------------------------------------------------------------


@dataclass
class PushReport:
    uploaded: list[str] = field(default_factory=list)
    present: list[str] = field(default_factory=list)  # uploaded before
    dropped: list[str] = field(default_factory=list)  # local copies removed (confirmed first)
    writing: list[str] = field(default_factory=list)  # packs of runs being written: left
    failed: list[tuple[str, str]] = field(default_factory=list)  # (pack, why)


def local_pack_names(packs_dir: Path) -> list[str]:
    try:
        entries = list(os.scandir(packs_dir))
    except FileNotFoundError:
        return []
    return sorted(
        e.name[: -len(".pack")]
        for e in entries
        if e.name.endswith(".pack") and e.is_file(follow_symlinks=False)
    )


def push(
    root: Path,
    packs_dir: Path,
    remote: RemoteBlobs,
    *,
    owner: str | None = None,
    drop_local: bool = False,
) -> PushReport:
    """Upload every local pack whose run nobody is writing (``owner``: the run whose writer is
    calling, its packs sealed), confirming each copy; with ``drop_local``, then remove the
    local copies whose object was confirmed to hold the same bytes."""
    report = PushReport()
    names = local_pack_names(packs_dir)
    if not names:
        return report
    listing = remote.list_packs()
    for name in names:
        run_id = name.rsplit(".", 1)[0]
        if run_id != owner and is_locked(root / run_id):
            report.writing.append(name)
            continue
        local = packs_dir / f"{name}.pack"
        try:
            size = local.stat().st_size
            if listing.get(name) == size or not remote.upload(local, name):
                report.present.append(name)
            else:
                report.uploaded.append(name)
            if drop_local:
                remote.confirm(local, name)
                local.unlink()
                report.dropped.append(name)
        except RemoteBlobsError as exc:
            report.failed.append((name, exc.message))
        except FileNotFoundError:
            continue  # another process dropped it meanwhile, after confirming its copy
    if report.dropped:
        fsync_dir(packs_dir)
    return report
