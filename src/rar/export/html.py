"""A recorded run as ONE self-contained HTML file: the viewer's run page and replay player,
working offline from ``file://``.

The viewer's CSS and scripts are inlined. The run's data is embedded as one JSON document
(format ``rar-html-export/2``):

* ``run`` — what ``/api/runs/{id}`` answers (summary, verification, and whether each cited
  passage still matched its content hash when the page was exported);
* ``events`` — the run's events as stored, payload fields left as references;
* ``blobs`` — ``digest → JSON value`` for every blob those references need, each stored once. A
  conversation is kept in its linked form (``{"$chain": head, "length": n}`` over message and
  node blobs, see :mod:`rar.store.payloads`), and the page un-links it when a payload is opened,
  so a long conversation costs linear space here too. A blob of more than ``cap`` bytes is
  replaced by ``{"$cut": text}``: its first ``cap`` bytes and a note;
* ``artifacts`` — ``name → {url, media_type, size, digest}`` for the run's pictures, as
  ``data:`` URLs (read from the verified blob, not from the artifacts folder);
* ``payload_errors`` — why a blob could not be read, per digest;
* ``flow`` — what ``/api/runs/{id}/flow`` answers (the run's agentic flows, for the Flow panel;
  absent from pages exported before flows existed).

A small document is embedded as JSON in ``<script type="application/json" id="rar-data">`` with
``<``, ``>`` and ``&`` escaped as ``\\u003c``, ``\\u003e`` and ``\\u0026`` (no recorded text can
close the tag). Above :data:`COMPRESS_ABOVE` bytes it is gzip-compressed and base64-encoded into
``<script type="application/octet-stream" id="rar-data-gz">`` and the page inflates it with the
browser's ``DecompressionStream``. Either way the page renders every recorded value as text, as
the served viewer does.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from rar.errors import RarError
from rar.hashing import is_digest
from rar.store.payloads import is_payload_ref

FORMAT = "rar-html-export/2"
PAYLOAD_CAP = 256 * 1024
"""Bytes of JSON kept per blob; a bigger one becomes its cut text with a note."""
COMPRESS_ABOVE = 1 << 20
"""Embedded JSON bigger than this (bytes) is stored gzip-compressed and base64-encoded."""
PICTURE_CAP = 8 << 20
"""Pictures bigger than this are left out of the page (named, with a note)."""
PICTURE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp", "image/svg+xml"})

# the values the page needs whole (the answer and its anchors drive the evidence chain)
_WHOLE = {("run.finished", "result"), ("evidence", "anchors")}
_CHAIN = "$chain"
_PLAIN_RE = re.compile(r'<script type="application/json" id="rar-data">(.*?)</script>', re.S)
_GZ_RE = re.compile(
    r'<script type="application/octet-stream" id="rar-data-gz">([A-Za-z0-9+/=\s]*)</script>'
)


def _static_dir() -> Path:
    from rar.viewer.app import STATIC_DIR

    return Path(STATIC_DIR)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))


def _cut(raw: bytes, cap: int) -> str:
    try:
        text = json.dumps(orjson.loads(raw), ensure_ascii=False, indent=2)
    except orjson.JSONDecodeError:
        text = raw.decode("utf-8", errors="replace")
    data = text.encode("utf-8")
    shown = data[:cap].decode("utf-8", errors="ignore")
    return f"{shown}\n… [cut by rar export: {len(raw)} bytes of JSON, the first {cap} shown]"


def _digest(value: Any) -> str | None:
    return value if is_digest(value) else None


class _Blobs:
    """Every blob a run's payload references need, each once, numbered in the order met.

    Inside the embedded values, the digests that link blobs together (a chain's head, a node's
    ``item`` and ``prev``) are replaced by those numbers: the page follows them without a digest
    table, and 70-byte hashes, which do not compress, are not repeated tens of thousands of
    times. The events keep their references (full digests) as recorded, plus ``"@": number``.
    """

    def __init__(self, store: Any, cap: int) -> None:
        self.store = store
        self.cap = cap
        self.numbers: dict[str, int] = {}
        self.values: list[Any] = []
        self.cut: dict[str, str] = {}
        self.errors: dict[str, str] = {}
        self.heads: dict[str, int] = {}  # chains named by values inline in events

    def number(self, digest: str) -> int:
        found = self.numbers.get(digest)
        if found is None:
            found = self.numbers[digest] = len(self.values)
            self.values.append(None)
        return found

    def add_ref(self, ref: dict[str, Any], *, whole: bool = False) -> int | None:
        """Embed what ``ref`` needs; the number of its blob (None for an inline value)."""
        if "value" in ref:
            self._link(ref["value"], inline=True)  # inline, but it may still name chains
            return None
        return self._add(ref["digest"], whole=whole)

    def _add(self, digest: str, *, whole: bool = False) -> int:
        known = digest in self.numbers
        number = self.number(digest)
        if known:
            return number
        key = str(number)
        try:
            raw = self.store.get_blob(digest)  # re-hashed by the pack reader
        except RarError as exc:
            self.errors[key] = exc.message
            return number
        except (OSError, ValueError, KeyError) as exc:
            self.errors[key] = f"cannot read blob {digest}: {exc}"
            return number
        if len(raw) > self.cap and not whole:
            self.cut[key] = _cut(raw, self.cap)
            return number
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError:
            self.errors[key] = f"blob {digest} is not JSON ({len(raw)} bytes)"
            return number
        if _CHAIN.encode() in raw:
            value = self._link(value)
        self.values[number] = value
        return number

    def _link(self, value: Any, *, inline: bool = False) -> Any:
        """``value`` with every chain head replaced by its number (the chain embedded)."""
        if isinstance(value, dict):
            head = _digest(value.get(_CHAIN))
            if head is not None and set(value) == {_CHAIN, "length"}:
                number = self._chain(head)
                if inline:
                    self.heads[head] = number
                return {**value, _CHAIN: number}
            return {key: self._link(item, inline=inline) for key, item in value.items()}
        if isinstance(value, list):
            return [self._link(item, inline=inline) for item in value]
        return value

    def _chain(self, head: str) -> int:
        first = self.number(head)
        node: str | None = head
        while node is not None and self.values[self.numbers[node]] is None:
            key = str(self.numbers[node])
            if key in self.errors or key in self.cut:
                break
            try:
                body = orjson.loads(self.store.get_blob(node))
            except (RarError, OSError, ValueError, KeyError) as exc:
                self.errors[key] = getattr(exc, "message", None) or f"cannot read {node}: {exc}"
                break
            item = _digest(body.get("item")) if isinstance(body, dict) else None
            if item is None:
                self.errors[key] = f"chain node {node} names no message"
                break
            prev = _digest(body.get("prev"))
            linked: dict[str, int] = {"item": self._add(item)}
            if prev is not None:
                linked["prev"] = self.number(prev)
            self.values[self.numbers[node]] = linked
            node = prev  # stops at a node already embedded: the rest of the chain is in
        return first


def _artifacts(
    store: Any, events: Iterable[dict[str, Any]], cap: int = PICTURE_CAP
) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for event in events:
        if event.get("type") != "artifact" or not isinstance(event.get("name"), str):
            continue
        media_type = str(event.get("media_type") or "")
        entry: dict[str, Any] = {
            "media_type": media_type,
            "size": event.get("size"),
            "digest": event.get("digest"),
            "url": None,
            "note": None,
        }
        if media_type not in PICTURE_TYPES:
            entry["note"] = "only pictures are embedded in an exported page"
        elif not isinstance(event.get("size"), int) or event["size"] > cap:
            entry["note"] = f"larger than {cap} bytes: left out of the exported page"
        else:
            try:
                raw = store.get_blob(str(event.get("digest")))
                entry["url"] = f"data:{media_type};base64,{base64.b64encode(raw).decode()}"
            except RarError as exc:
                entry["note"] = f"cannot be read: {exc.message}"
        found[event["name"]] = entry
    return found


def export_data(store: Any, run_id: str, *, cap: int = PAYLOAD_CAP) -> dict[str, Any]:
    """The document embedded in the page (see the module's docstring)."""
    from rar.viewer.flows import flow_document
    from rar.viewer.reading import StoreReader, build_run_detail

    detail, log = build_run_detail(StoreReader(Path(store.root)), store, run_id)
    blobs = _Blobs(store, cap)
    events = []
    for event in log.events:
        copy = dict(event)
        for name, ref in event.items():
            if is_payload_ref(ref):
                number = blobs.add_ref(ref, whole=(event.get("type"), name) in _WHOLE)
                if number is not None:
                    copy[name] = {**ref, "@": number}
        events.append(copy)
    return {
        "format": FORMAT,
        "run": detail,
        "events": {
            "id": run_id,
            "offset": 0,
            "limit": len(log.events),
            "total": len(log.events),
            "complete": log.complete,
            "problems": log.problems,
            "next_offset": None,
            "events": events,
        },
        "blobs": blobs.values,
        "cut": blobs.cut,
        "errors": blobs.errors,
        "heads": blobs.heads,
        "artifacts": _artifacts(store, log.events),
        "flow": {"id": run_id, **flow_document(store, log.events)},
    }


def embedded_payload(data: dict[str, Any], seq: int, field: str) -> Any:
    """The plain value of event ``seq``'s payload ``field`` read from an export's document, as
    the page reads it (``ValueError`` when it is not in the export)."""
    event = next((e for e in data["events"]["events"] if e.get("seq") == seq), None)
    if event is None or not is_payload_ref(event.get(field)):
        raise ValueError(f"event {seq} has no payload {field!r} in this export")
    ref = event[field]
    if "value" in ref:
        return _unlink_embedded(data, ref["value"])
    return _unlink_embedded(data, _embedded_blob(data, ref["@"]))


def _embedded_blob(data: dict[str, Any], ref: int | str) -> Any:
    number = data["heads"].get(ref) if isinstance(ref, str) else ref
    if not isinstance(number, int) or not 0 <= number < len(data["blobs"]):
        raise ValueError(f"blob {ref} is not in this export")
    key = str(number)
    if key in data["errors"]:
        raise ValueError(data["errors"][key])
    if key in data["cut"]:
        return data["cut"][key]
    return data["blobs"][number]


def _unlink_embedded(data: dict[str, Any], value: Any) -> Any:
    if isinstance(value, list):
        return [_unlink_embedded(data, item) for item in value]
    if not isinstance(value, dict):
        return value
    if set(value) == {_CHAIN, "length"}:
        items = []
        node: Any = value[_CHAIN]
        while node is not None:
            body = _embedded_blob(data, node)
            items.append(_unlink_embedded(data, _embedded_blob(data, body["item"])))
            node = body.get("prev")
            if len(items) > value["length"]:
                raise ValueError("a message chain is longer than recorded")
        items.reverse()
        return items
    return {key: _unlink_embedded(data, item) for key, item in value.items()}


def embed_json(data: Any) -> str:
    """JSON safe inside a ``<script>`` element: no ``<``, ``>`` or ``&`` left raw."""
    return (
        _dumps(data)
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _embed(data: dict[str, Any], compress: bool | None) -> str:
    text = embed_json(data)
    if compress is None:
        compress = len(text) > COMPRESS_ABOVE
    if not compress:
        return f'<script type="application/json" id="rar-data">{text}</script>'
    packed = base64.b64encode(gzip.compress(text.encode("utf-8"), 9, mtime=0)).decode("ascii")
    lines = "\n".join(packed[i : i + 120] for i in range(0, len(packed), 120))
    return f'<script type="application/octet-stream" id="rar-data-gz">\n{lines}\n</script>'


def read_embedded(html: str) -> dict[str, Any]:
    """The document embedded in an exported page (plain or compressed)."""
    html = html.split("</head>", 1)[0]  # the data element is in the head, before any script
    match = _PLAIN_RE.search(html)
    if match is not None:
        data: dict[str, Any] = json.loads(match.group(1))
        return data
    match = _GZ_RE.search(html)
    if match is None:
        raise ValueError("no rar export data in this HTML")
    raw = gzip.decompress(base64.b64decode("".join(match.group(1).split())))
    data = json.loads(raw)
    return data


def _inline_code(text: str, tag: str) -> str:
    # the viewer's own code: make sure it cannot end its element early
    return text.replace(f"</{tag}", f"<\\/{tag}")


def render_html(data: dict[str, Any], *, compress: bool | None = None) -> str:
    """The page for ``data`` (from :func:`export_data`); ``compress``: None decides by size."""
    from rar.viewer.app import SCRIPTS, STYLES

    static = _static_dir()
    css = "\n".join(
        _inline_code((static / name).read_text(encoding="utf-8"), "style") for name in STYLES
    )
    # classic scripts at the end of <body>, in the viewer's load order (inline scripts cannot
    # be deferred)
    js = "".join(
        f"<script>\n{_inline_code((static / name).read_text(encoding='utf-8'), 'script')}\n"
        "</script>\n"
        for name in SCRIPTS
    )
    icon = base64.b64encode((static / "favicon.svg").read_bytes()).decode("ascii")
    run_id = str(data["run"]["id"])
    title = (
        f"Run {run_id} · RAR export".replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    )
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; \
style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<title>{title}</title>
<style>
{css}
</style>
<link rel="icon" href="data:image/svg+xml;base64,{icon}" type="image/svg+xml">
{_embed(data, compress)}
</head>
<body>
<header class="top"><span class="brand">RAR viewer</span> \
<span class="muted">offline export of one run</span></header>
<main id="app"><p class="muted" id="loading">Loading…</p></main>
<noscript><p>This exported run needs JavaScript to display.</p></noscript>
{js}</body>
</html>
"""


def export_html(
    store: Any, run_id: str, *, cap: int = PAYLOAD_CAP, compress: bool | None = None
) -> str:
    """The run ``run_id`` of ``store`` as one self-contained HTML document."""
    return render_html(export_data(store, run_id, cap=cap), compress=compress)
