"""`python -m logbroker --config FILE [-o key=value ...] [--bug NAME ...]`: run one broker.

SIGTERM/SIGINT shut down cleanly (stop accepting, flush, write checkpoints); SIGKILL is survived
by log recovery on the next start.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path

from logbroker import probes
from logbroker.config import ConfigError, load_config
from logbroker.core.broker import BrokerCore
from logbroker.core.clock import SystemClock
from logbroker.server import BrokerServer

PROBE_FLUSH_S = 5.0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="logbroker", description=__doc__)
    ap.add_argument("--config", type=Path, help="a .properties file with Kafka-style keys")
    ap.add_argument("-o", "--override", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--bug", action="append", default=[], metavar="NAME", help="turn on a bug switch")
    ap.add_argument("--list-bugs", action="store_true", help="print the bug switches, one per line, and exit")
    ap.add_argument("--log-level", default="INFO")
    ap.add_argument("--wire-trace", action="store_true",
                    help="log each client's Metadata, ListOffsets, OffsetForLeaderEpoch, FindCoordinator, "
                         "OffsetFetch/Commit and failed Fetch partitions with their answers (logger logbroker.wire)")
    return ap.parse_args(argv)


async def serve(core: BrokerCore) -> None:
    server = BrokerServer(core)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    starter = getattr(core.replication, "start_async", None)
    flusher = asyncio.ensure_future(_flush_probes()) if core.config.probes_dir is not None else None
    await server.start()
    if starter is not None:
        await starter()
    await stop.wait()
    logging.getLogger("logbroker").info("shutting down")
    stopper = getattr(core.replication, "stop_async", None)
    if stopper is not None:
        await stopper()
    await server.stop()
    core.close()
    if flusher is not None:
        flusher.cancel()
    probes.flush()


async def _flush_probes() -> None:
    """Write the probe counts every few seconds: a SIGKILL loses only the repeats since the last write
    (a probe's first hit is written at once)."""
    while True:
        await asyncio.sleep(PROBE_FLUSH_S)
        probes.flush()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.list_bugs:
        from logbroker.bugs import Bug

        print("\n".join(b.value for b in Bug))
        return 0
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.wire_trace:
        logging.getLogger("logbroker.wire").setLevel(logging.DEBUG)
    try:
        config = load_config(args.config, args.override, args.bug)
    except ConfigError as e:
        print(f"logbroker: {e}", file=sys.stderr)
        return 2
    if config.bugs:  # an operator reading the log must see at once that this broker is broken on purpose
        logging.getLogger("logbroker").warning("bug switches on: %s", ", ".join(sorted(b.value for b in config.bugs)))
    if config.probes_dir is not None:
        probes.persist_to(config.probes_dir)
    core = BrokerCore(config, SystemClock())
    core.load_partitions()
    if config.standalone:
        core.replication.start()  # type: ignore[attr-defined]
    else:
        from logbroker.coord.zk import ZkStore
        from logbroker.offload import in_worker_thread
        from logbroker.replication import attach  # cluster-impl II

        # the process entry builds the real store and chooses threads for blocking calls; the
        # replica manager and controller are handed both (a simulator hands a model and `inline`)
        attach(core, ZkStore(config.zookeeper_connect, config.zookeeper_session_timeout_ms), in_worker_thread)
    asyncio.run(serve(core))
    return 0


if __name__ == "__main__":
    sys.exit(main())
