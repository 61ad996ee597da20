"""``rar proxy``: an OpenAI-compatible recording / replaying server on 127.0.0.1."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import click

from rar.cli.options import PORT, Seconds

DEFAULT_PORT = 8766


@click.command("proxy")
@click.option(
    "--upstream",
    default=None,
    help="The upstream API base URL, as OPENAI_BASE_URL would be (https://api.openai.com/v1). "
    "Needed to record; a replay uses the recorded one.",
)
@click.option(
    "--mode",
    type=click.Choice(["record", "replay", "cached"]),
    default="record",
    show_default=True,
    help="record: every request upstream, recorded; cached: served from the response cache "
    "when it has the answer, else upstream and recorded; replay: the answers of --run, with "
    "no upstream.",
)
@click.option("--run", "run_ref", default=None, help="The recorded session to replay.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    type=PORT,
    default=DEFAULT_PORT,
    show_default=True,
    help="Port to listen on (0: any free port).",
)
@click.option(
    "--api-key-env",
    default="OPENAI_API_KEY",
    show_default=True,
    help="The environment variable (of the proxy) holding the upstream key; clients' own "
    "Authorization headers are dropped.",
)
@click.option(
    "--header-timeout",
    type=Seconds(3600.0),
    default=10.0,
    show_default=True,
    help="Seconds a request's headers may take to arrive (then 408).",
)
@click.option(
    "--body-timeout",
    type=Seconds(3600.0),
    default=60.0,
    show_default=True,
    help="Seconds a request's body may take to arrive (then 408).",
)
@click.pass_context
def proxy_command(
    ctx: click.Context,
    upstream: str | None,
    mode: str,
    run_ref: str | None,
    host: str,
    port: int,
    api_key_env: str,
    header_timeout: float,
    body_timeout: float,
) -> None:
    """Serve an OpenAI-compatible API that records (or replays) every model call as a run.

    Point a client at it with OPENAI_BASE_URL=http://127.0.0.1:PORT/v1 (any OPENAI_API_KEY):
    each session in record or cached mode is one run, sealed when the proxy stops (Ctrl-C or
    SIGTERM); --mode replay --run RUN serves that session's answers with no upstream at all.
    """
    from rar.interop._server import bind, make_server
    from rar.interop.proxy import Proxy
    from rar.store.store import Store
    from rar.viewer.net import is_loopback

    if mode == "replay" and not run_ref:
        raise click.UsageError("--mode replay needs --run RUN")
    if mode != "replay" and not upstream:
        raise click.UsageError(f"--mode {mode} needs --upstream URL")
    if mode != "replay" and run_ref:
        raise click.UsageError("--run is for --mode replay")
    if not is_loopback(host):
        click.echo(
            f"warning: listening on {host}, not on a loopback address: anyone who can reach "
            "this machine can use the upstream key through the proxy and read what it "
            "recorded. The proxy has no authentication; use --host 127.0.0.1 unless that is "
            "what you want.",
            err=True,
        )
    store = Store(Path(ctx.find_root().obj or "runs"), create=mode != "replay")
    sock = bind(host, port)
    proxy = Proxy(
        store,
        mode=mode,
        upstream=upstream,
        source=run_ref,
        api_key=os.environ.get(api_key_env) or None,
        api_key_env=api_key_env,
        body_timeout=body_timeout,
    )
    shown = {"0.0.0.0": "127.0.0.1", "::": "[::1]", "[::]": "[::1]"}.get(host, host)
    if ":" in shown and not shown.startswith("["):
        shown = f"[{shown}]"
    url = f"http://{shown}:{sock.getsockname()[1]}/v1"
    server = make_server(proxy, header_timeout=header_timeout)
    announcer = threading.Thread(target=_announce, args=(server, proxy, url), daemon=True)
    announcer.start()
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
        summary = proxy.close()
    _farewell(summary)


def _announce(server: Any, proxy: Any, url: str) -> None:
    """Print the URL once the server accepts connections (never before)."""
    while not server.started:
        if server.should_exit:
            return
        time.sleep(0.01)
    where = f"replaying {proxy.source_id}" if proxy.mode == "replay" else f"→ {proxy.upstream}"
    click.echo(
        f"rar proxy ({proxy.mode}) at {url} {where}; run {proxy.run.id} "
        f"(set OPENAI_BASE_URL={url}; Ctrl-C stops it)"
    )


def _farewell(summary: Any) -> None:
    line = f"rar proxy stopped: {summary.requests} request(s), run {summary.run_id} completed"
    report = summary.report
    if report is not None:
        line += (
            f"; replay {report['replay_status']}: {report['served']} served, "
            f"{report['mismatched']} not recorded, {len(report['unconsumed'])} recorded "
            "but not asked"
        )
    click.echo(line)
