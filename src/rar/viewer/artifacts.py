"""Serving the files a run recorded under ``artifacts/``, never anything outside them."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from starlette.responses import Response

from rar.viewer.http import ApiError

ARTIFACTS_DIR = "artifacts"

INLINE_MEDIA_TYPES = frozenset(
    {"image/png", "image/jpeg", "image/gif", "image/webp", "image/svg+xml", "text/plain"}
)
"""Artifact types the viewer shows inline (pictures as ``<img>``); anything else downloads."""
ARTIFACT_CSP = (
    "default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'; sandbox; "
    "frame-ancestors 'none'"
)
"""The policy of an artifact answer: even an SVG opened on its own runs no script."""


def recorded_artifacts(events: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """name → the last ``artifact`` event recording it."""
    found: dict[str, dict[str, Any]] = {}
    for event in events:
        if event.get("type") == "artifact" and isinstance(event.get("name"), str):
            found[event["name"]] = event
    return found


def artifact_response(run_dir: Path, rel: str, recorded: dict[str, Any] | None = None) -> Response:
    """A regular file under ``run_dir/artifacts``, every component checked with ``lstat``.

    A file the run recorded (``recorded``: its ``artifact`` event) is re-hashed and refused
    (409) when it no longer matches the recorded digest; pictures of a type in
    :data:`INLINE_MEDIA_TYPES` are answered inline, anything else (or anything unrecorded) as an
    ``application/octet-stream`` download."""
    if not rel or "\x00" in rel or "\\" in rel or rel.startswith("/"):
        raise ApiError(400, "bad-path", "an artifact path is relative, with / separators")
    parts = rel.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise ApiError(400, "bad-path", "an artifact path may not contain '.', '..' or '//'")
    current = run_dir / ARTIFACTS_DIR
    chain = [current]
    for part in parts:
        current = current / part
        chain.append(current)
    for step, path in enumerate(chain):
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            raise ApiError(404, "artifact-not-found", f"no artifact {rel!r}") from None
        last = step == len(chain) - 1
        if stat.S_ISLNK(mode):
            raise ApiError(404, "artifact-not-found", f"{rel!r} passes through a symbolic link")
        if (not last and not stat.S_ISDIR(mode)) or (last and not stat.S_ISREG(mode)):
            raise ApiError(404, "artifact-not-found", f"no regular file {rel!r} in artifacts")
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(current, flags)
    except OSError:
        raise ApiError(404, "artifact-not-found", f"no artifact {rel!r}") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise ApiError(404, "artifact-not-found", f"no regular file {rel!r} in artifacts")
        data = handle.read()
    name = parts[-1].replace('"', "")
    media_type = "application/octet-stream"
    disposition = "attachment"
    if recorded is not None:
        from rar.hashing import digest_bytes

        if digest_bytes(data) != recorded.get("digest"):
            raise ApiError(
                409,
                "artifact-changed",
                f"artifact {rel!r} no longer matches the digest recorded at event "
                f"#{recorded.get('seq')}; `rar verify` reports the run",
            )
        if recorded.get("media_type") in INLINE_MEDIA_TYPES:
            media_type = str(recorded["media_type"])
            disposition = "inline"
    return Response(
        data,
        media_type=media_type,
        headers={
            "Content-Disposition": f'{disposition}; filename="{_ascii(name)}"',
            "Content-Security-Policy": ARTIFACT_CSP,
        },
    )


def _ascii(name: str) -> str:
    cleaned = "".join(c if 32 <= ord(c) < 127 else "_" for c in name)
    return cleaned or "artifact"
