"""``rar view``: serve the run store to a browser, read-only, on 127.0.0.1 by default."""

from __future__ import annotations

import contextlib
import socket
import threading
import webbrowser
from pathlib import Path

import click

DEFAULT_PORT = 8765


@click.command("view")
@click.option(
    "--store",
    "store_path",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Directory of the run store (default: the one given to rar).",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=DEFAULT_PORT,
    show_default=True,
    help="Port to listen on (0: any free port).",
)
@click.option("--no-open", is_flag=True, help="Do not open a browser.")
@click.pass_context
def view_command(
    ctx: click.Context, store_path: Path | None, host: str, port: int, no_open: bool
) -> None:
    """Browse runs in a local web viewer (read-only; never changes the store)."""
    import uvicorn

    from rar.viewer.app import create_app
    from rar.viewer.net import host_warning, is_loopback

    root = store_path if store_path is not None else Path(ctx.find_root().obj or "runs")
    warning = host_warning(host)
    if warning:
        click.echo(warning, err=True)
    if not root.is_dir():
        click.echo(f"note: no store at {root} yet; the viewer will show no runs", err=True)
    sock = _bind(host, port)
    bound_port = sock.getsockname()[1]
    # a wildcard address is not something a browser can open: show the loopback one
    shown = {"0.0.0.0": "127.0.0.1", "::": "[::1]", "[::]": "[::1]"}.get(host, host)
    if ":" in shown and not shown.startswith("["):
        shown = f"[{shown}]"
    url = f"http://{shown}:{bound_port}/"
    app = create_app(root, allowed_hosts=None if is_loopback(host) else ["*"])
    click.echo(f"RAR viewer for {root} at {url} (Ctrl-C stops it)")
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    if not no_open:
        threading.Timer(0.5, _open, [url]).start()
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()


def _bind(host: str, port: int) -> socket.socket:
    name = host.strip("[]")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            name, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
        )[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        raise click.ClickException(
            f"cannot listen on {host}:{port} ({exc.strerror or exc}); try another --port, "
            "or --port 0 for any free one"
        ) from exc
    return sock


def _open(url: str) -> None:
    with contextlib.suppress(Exception):  # no browser is not an error
        webbrowser.open(url)
