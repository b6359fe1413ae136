"""A broker cut off from ZooKeeper tries again about every second, however long the cut, and is back
within seconds of the heal.

kazoo's default connection policy doubles the pause after every failed round of attempts, up to an
hour, and starts again from 0.1 s only after a handshake succeeds. A partitioned node's ZooKeeper
server has no quorum: it accepts the broker's connection and closes it, round after round, so the
pause grows while the cut lasts, and after the heal the broker stays away for as long as the last
pause (tens of seconds after a 20-s cut; its controller, coordinators and ISR changes deaf all that
time). `logbroker.coord.zk.RECONNECT_MAX_DELAY_S` caps it, as ZooKeeper's Java client does.

The proxy in front of a real ZooKeeper plays the server without a quorum (`CuttableProxy.hold`)."""

from __future__ import annotations

import time

import pytest
from logbroker.coord.zk import RECONNECT_MAX_DELAY_S, ZkStore
from tcpproxy import CuttableProxy
from zklib import LocalZooKeeper

pytestmark = pytest.mark.zookeeper
HELD_S = 20.0


def test_attempts_keep_coming_through_a_long_cut_and_the_heal_is_noticed_at_once(zookeeper: LocalZooKeeper) -> None:
    proxy = CuttableProxy(zookeeper.port)
    store = ZkStore(f"127.0.0.1:{proxy.port}", 6000)
    try:
        store.start()
        session = store.zk.client_id
        proxy.hold()
        held_at = time.monotonic()
        time.sleep(HELD_S)  # the cut is the test's subject: it lasts this long whatever happens
        late = [t - held_at for t in proxy.refused if t - held_at >= HELD_S / 2]
        # at most RECONNECT_MAX_DELAY_S (+40% jitter) between rounds: 7 or more in the cut's second half;
        # kazoo's default made one or two there (its pauses had grown past 6 s)
        assert len(late) >= 5, f"attempts in the cut's second half at {[round(t, 1) for t in late]} s; " \
                               f"all at {[round(t - held_at, 1) for t in proxy.refused]} s"
        proxy.release()
        released = time.monotonic()
        deadline = released + 3 * RECONNECT_MAX_DELAY_S + 3.0
        while not store.connected and time.monotonic() < deadline:
            time.sleep(0.05)
        last = proxy.refused[-1] - held_at
        assert store.connected, f"not connected {time.monotonic() - released:.1f} s after the heal " \
                                f"(state {store.zk.state}; last attempt {last:.1f} s into the cut)"
        assert store.zk.client_id != session, "a 20-s cut expires a 6-s session: the store is on a new one"
        store.zk.get("/")  # and it answers
    finally:
        store.stop()
        proxy.close()
