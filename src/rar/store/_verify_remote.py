"""``rar verify`` of a store whose blobs live at an fsspec URL: the remote copies.

The whole-store check re-hashes every pack where reads find it: the local copy when there is
one, else the object (:class:`~rar.store.remote.RemotePackReader`). The object is the copy that
outlives the local disk, so it is checked too: an object whose bytes equal the local copy's is
as sound as it; one that differs is re-hashed record by record and what is wrong is reported
with its URL. A local pack with no object is a ``not-uploaded`` warning (nothing is lost, the
local copy is durable) unless its run is being written. Nothing is uploaded or changed here.
"""

from __future__ import annotations

from rar.store._verify_report import Problem, VerifyReport
from rar.store.lock import is_locked
from rar.store.remote import RemoteBlobs, RemotePackReader, local_pack_names, verify_object
from rar.store.store import Store


def check_remote_copies(store: Store, report: VerifyReport) -> None:
    reader = store.reader
    if not isinstance(reader, RemotePackReader):
        return
    remote = reader.remote
    listing = remote.list_packs()
    for name in local_pack_names(store.packs_dir):
        local = store.packs_dir / f"{name}.pack"
        url = remote.object_url(name)
        if name not in listing:
            if is_locked(store.run_dir(name.rsplit(".", 1)[0])):
                report.notes.append(f"pack {name}: being written; uploaded when its writer closes")
                continue
            report.warnings.append(
                Problem(
                    None,
                    "not-uploaded",
                    f"pack {name} is in {local} but not at {url} yet (its writer stopped before "
                    "uploading it, or the upload failed); nothing is lost. `rar store push` "
                    "uploads it",
                    path=str(local),
                )
            )
            continue
        try:
            mine = local.read_bytes()
        except FileNotFoundError:
            continue  # dropped meanwhile, after its object was confirmed: checked as remote-only
        remote.forget(name)
        if remote.read_from(name) == mine:
            continue
        _report_object(name, url, len(mine), remote, report)


def _report_object(
    name: str, url: str, local_size: int, remote: RemoteBlobs, report: VerifyReport
) -> None:
    scan, failures = verify_object(remote, name)
    found = len(report.problems)
    for record, why in failures:
        report.problems.append(
            Problem(
                None, "blob-corrupt", f"pack {name}: {why}", path=url, offset=record.location.offset
            )
        )
    for damage in scan.damage:
        report.problems.append(
            Problem(None, "pack", f"pack {name}: {damage.detail}", path=url, offset=damage.offset)
        )
    if len(report.problems) == found:
        report.problems.append(
            Problem(
                None,
                "pack",
                f"pack {name}: the object ({scan.size} bytes) differs from the local copy "
                f"({local_size} bytes)",
                path=url,
            )
        )
