"""``rar store push``: upload a store's local packs to the blob URL it names (see docs/scale.md,
"Blobs on S3 (or any fsspec URL)")."""

from __future__ import annotations

import click
import orjson


@click.group("store")
def store_group() -> None:
    """Where a store keeps its parts: upload its packs to its blob URL."""


@store_group.command("push")
@click.option(
    "--drop-local",
    is_flag=True,
    help="Then remove each local pack whose uploaded copy was confirmed to hold the same bytes "
    "(reads then fetch byte ranges from the URL).",
)
@click.option("--json", "as_json", is_flag=True, help="Print what was done as JSON.")
@click.pass_context
def push_command(ctx: click.Context, drop_local: bool, as_json: bool) -> None:
    """Upload every local pack not uploaded yet (packs of runs being written are left for their
    writer). Exit 1 when a pack could not be uploaded; it stays local, nothing is lost."""
    from rar.errors import ConfigError
    from rar.store.remote import push
    from rar.store.store import Store

    store = Store(ctx.find_root().obj)
    remote = store.remote
    if remote is None:
        raise ConfigError(
            f"the store at {store.root} keeps its blobs in {store.packs_dir} only; name a blob "
            "URL with RAR_BLOBS_URL (e.g. s3://bucket/prefix) to push them there"
        )
    store.ensure_writable()
    report = push(store.root, store.packs_dir, remote, drop_local=drop_local)
    if as_json:
        data = {
            "url": remote.url,
            "uploaded": report.uploaded,
            "present": report.present,
            "dropped": report.dropped,
            "writing": report.writing,
            "failed": [{"pack": pack, "error": why} for pack, why in report.failed],
        }
        click.echo(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode())
    else:
        click.echo(
            f"{len(report.uploaded)} pack(s) uploaded to {remote.url}, "
            f"{len(report.present)} there already"
            + (f", {len(report.dropped)} local copies removed" if drop_local else "")
            + (f"; {len(report.writing)} being written, left" if report.writing else "")
        )
        for pack, why in report.failed:
            click.echo(f"error: pack {pack}: {why}", err=True)
    ctx.exit(1 if report.failed else 0)
