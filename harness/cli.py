"""The `chaos` command line.

Sub-commands live next to what they drive and are imported only when used, so `chaos --help` is
fast and a broken optional part (Spark, Docker) cannot stop the others. To add one, add a line to
`COMMANDS`. Errors derived from `ChaosError` become one sentence on stderr and their exit code.
"""

from __future__ import annotations

import importlib
import signal
import sys
from typing import Any

import click

from harness.signals import signum_of, stop_signals
from kernel.errors import EXIT_INTERNAL, SIGNAL_EXIT, ChaosError

#: command name -> ("module:attribute" of a click command or group, one-line help for `chaos --help`).
COMMANDS: dict[str, tuple[str, str]] = {
    "cluster": ("harness.cluster_cli:cluster", "Bring a cluster of nodes up, inspect it, run commands, tear it down."),
    "check": ("results.cli:check", "Check a history (or a run directory) for anomalies."),
    "check-server": ("results.server_cli:check_server",
                     "Show or stop the warm Spark server that `chaos check` shares (stops itself when idle)."),
    "detect": ("harness.detect_cli:detect", "Detection matrix: is every bug switch caught, the clean cluster quiet?"),
    "heal": ("harness.heal_cli:heal", "Heal every fault on a running cluster by hand."),
    "run": ("harness.run_cli:run", "Provision, run a workload under faults, record, check, report."),
    "replay": ("harness.run_cli:replay", "Re-run a stored run from its seed and compare the anomalies."),
    "sim-search": ("harness.sim_search_cli:sim_search",
                   "Simulate seeds in parallel until one fails; shrink it; save it as a run with its report."),
    "nemeses": ("harness.nemeses_cli:nemeses", "List every fault family and kind with one line of what it does."),
    "systems": ("harness.systems_cli:systems", "List the systems under test, or show what one declares."),
    "nightly": ("harness.nightly_cli:nightly", "Run a matrix of runs in a time budget; summary page and JUnit XML."),
    "serve": ("harness.serve_cli:serve", "Serve the run store (index, reports, plots) on 127.0.0.1."),
    "analyze": ("harness.analyze_cli:analyze", "Cross-run analysis on Spark: tables per configuration and night."),
}


class LazyGroup(click.Group):
    """A click group whose sub-commands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module, attr = COMMANDS[name][0].split(":")
        cmd: click.Command = getattr(importlib.import_module(module), attr)
        return cmd

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """List commands from COMMANDS without importing them (Spark and Docker load slowly)."""
        with formatter.section("Commands"):
            formatter.write_dl([(name, COMMANDS[name][1]) for name in sorted(COMMANDS)])


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="chaos-harness")
@click.option("-v", "--verbose", is_flag=True,
              help="Show the tools' own output too (the Spark JVM's, warnings of our modules); it is always "
                   "in the log files (the run's spark.log and nodes/, or the shared check server's server.log).")
def cli(verbose: bool) -> None:
    """Chaos-test a Kafka-like replicated log: provision, fault, record, check, report."""
    import logging

    if verbose:
        import os

        os.environ["CHAOS_VERBOSE"] = "1"  # read where a tool is started (results.spark)
        logging.basicConfig(level=logging.INFO, format="chaos: %(name)s: %(message)s")
    else:
        # The console carries our own sentences only. Without a root handler, a library's module-level
        # `logging.info(...)` (py4j calls one when a gateway command fails) installs a stderr handler
        # through the implicit basicConfig, after which every record of the in-process broker (the
        # simulator, shrinking in this process) reached the terminal: 19,066 INFO lines in one night's
        # sim stage. This handler takes that place and shows what Python's last resort showed before:
        # warnings of our own packages, as bare sentences. The broker's records go to the node logs.
        logging.getLogger().addHandler(_our_warnings())


#: the packages whose warnings reach the console without -v
OUR_PACKAGES = frozenset({"harness", "kernel", "nemesis", "results", "workloads"})


def _our_warnings() -> Any:
    import logging

    handler = logging.StreamHandler()
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler.addFilter(lambda record: record.name.split(".")[0] in OUR_PACKAGES)
    return handler


def main(argv: list[str] | None = None) -> Any:
    """Console-script entry. A command returns its exit code (an int) or None for 0;
    ChaosError -> one line on stderr and its exit code; click usage errors exit 3 (2 means unknown)."""
    try:
        with stop_signals():
            rv = cli.main(args=argv, standalone_mode=False)
        sys.exit(rv if isinstance(rv, int) else 0)
    except ChaosError as e:
        click.echo(f"chaos: {e}", err=True)
        sys.exit(e.exit_code)
    except click.exceptions.Abort as e:
        code = SIGNAL_EXIT.get(signal.Signals(signum_of(e.__context__ or e)), 130) if e.__context__ else 130
        click.echo("chaos: interrupted", err=True)
        sys.exit(code)
    except KeyboardInterrupt as e:
        click.echo("chaos: interrupted", err=True)
        sys.exit(SIGNAL_EXIT.get(signal.Signals(signum_of(e)), 130))
    except click.ClickException as e:  # a usage error: one line, like every other error
        hint = ""
        if isinstance(e, click.UsageError) and e.ctx is not None:
            hint = f" (see `{e.ctx.command_path} --help`)"
        click.echo(f"chaos: {e.format_message()}{hint}", err=True)
        sys.exit(3 if e.exit_code == 2 else e.exit_code)
    except Exception as e:  # a bug of ours: never exit 1, which would read as "anomalies found"
        where = _save_traceback()
        click.echo(f"chaos: internal error ({type(e).__name__}: {e}); this is a harness bug, "
                   f"the traceback is in {where}", err=True)
        sys.exit(EXIT_INTERNAL)


def _save_traceback() -> str:
    import traceback

    from harness.provision.state import chaos_home

    try:
        path = chaos_home() / "last-error.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(traceback.format_exc())
        return str(path)
    except (OSError, ChaosError):
        traceback.print_exc()
        return "the output above"


if __name__ == "__main__":
    main()
