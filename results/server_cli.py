"""`chaos check-server status|stop`: the shared warm Spark server that `chaos check` uses (`results.server`).

It stops by itself after `$CHAOS_CHECK_SERVER_IDLE` seconds without a check; `stop` is for a user who
wants the memory back now, or a new JVM option to take effect.
"""

from __future__ import annotations

import time

import click


@click.group("check-server")
def check_server() -> None:
    """The shared Spark server of `chaos check` (started on first use, stopped when idle)."""


@check_server.command()
def status() -> int:
    """Say whether a server runs, where, and for how long it has been idle."""
    from results import server

    state = server.read_state()
    if state is None or not server.alive(state.pid):
        click.echo(f"no check server runs (its files: {server.home()})")
        return 0
    try:
        idle = time.time() - (server.home() / "used").stat().st_mtime
    except OSError:
        idle = 0.0
    click.echo(f"check server {state.pid} on 127.0.0.1:{state.port} ({state.versions}), up "
               f"{time.time() - state.started:.0f} s, idle {idle:.0f} s of {server.idle_s():.0f}; "
               f"log: {server.home() / 'server.log'}")
    return 0


@check_server.command()
def stop() -> int:
    """Stop the server now (a check running on it fails; the next check starts a new one)."""
    from results import server

    state = server.stop()
    click.echo(f"stopped check server {state.pid}" if state is not None else "no check server runs")
    return 0
