"""`chaos serve [--port 8080] [STORE]`: the run store over HTTP on this machine only.

Everything in the store is already a static page (`index.html`, each run's `report.html`), so the
standard library's file server is all it takes; this command refreshes the index first and binds to
the loopback address, never to every interface: a store holds node logs and cluster details that
are nobody else's business. `--port 0` picks a free port; the URL is printed either way.
"""

from __future__ import annotations

import functools
import http.server
import sys
from pathlib import Path
from typing import Any

import click

from kernel.errors import EnvironmentProblem, UsageError

HOST = "127.0.0.1"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    """Serves the store directory; logs each request as one short line on stderr."""

    def log_message(self, format: str, *args: Any) -> None:
        sys.stderr.write(f"{self.address_string()} {format % args}\n")

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-cache")  # a report rewritten by a later check shows at once
        super().end_headers()


def make_server(store: Path, port: int) -> http.server.ThreadingHTTPServer:
    handler = functools.partial(_Quiet, directory=str(store))
    try:
        return http.server.ThreadingHTTPServer((HOST, port), handler)
    except OSError as e:
        raise EnvironmentProblem(f"cannot listen on {HOST}:{port}: {e.strerror or e}; pick another --port") from None


@click.command()
@click.argument("store", type=click.Path(path_type=Path), default=Path("store"))
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True,
              help="Port on 127.0.0.1 (0: any free port).")
def serve(store: Path, port: int) -> int:
    """Serve the run store (index, reports, plots, raw files) on http://127.0.0.1:PORT/ until Ctrl-C."""
    from results.index import write_index

    if not store.is_dir():
        raise UsageError(f"{store} is not a directory; name a run store (the --store of chaos run)")
    write_index(store)
    server = make_server(store, port)
    click.echo(f"serving {store.resolve()} at http://{HOST}:{server.server_address[1]}/ (Ctrl-C to stop)")
    sys.stdout.flush()
    try:
        server.serve_forever(poll_interval=0.25)
    except KeyboardInterrupt:
        click.echo("stopped", err=True)
    finally:
        server.server_close()
    return 0
