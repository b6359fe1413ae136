"""Bufstream's scenario (jepsen.io/analyses/bufstream-0.1.0, 2024): a produce delayed past the end of
its transaction.

The clients' requests to one key's leader are held — dropped on its broker port, so TCP keeps them
and delivers them, in order, when the cut is lifted — for longer than a producer waits for a
produce (its transaction timeout): the producer gives up on the write, its transaction is aborted
(or its outcome unknown), and the producer goes on with its next transactions. When the cut lifts,
the held produce reaches the leader after its transaction ended. A broker that verifies
transactional writes with the coordinator (KIP-890) refuses it — provided the producer's epoch moved
on: part 1 asks only whether the partition is in the producer's ongoing transaction, which it is
once the producer's next transaction added it, so the producer bumps its epoch at every end (part 2)
or after aborting a transaction whose write timed out (KIP-360; librdkafka and the Java client do,
and so does the simulator's client since the nightly's seed 5). One that does not verify (the switch
`no-txn-verification`, Kafka before KIP-890) lets it open a transaction on the partition that the
producer's next transaction there commits: the aborted transaction's write is read as committed, a
torn transaction (G1a in the history). Written once against `Net`: iptables in containers, the
network model in the simulator, where the held request is delivered for certain (a real client may
close its connection first, and then nothing is delivered).

Kind `leader`: the leader of a key chosen from the seed, resolved when the fault starts.
"""

from __future__ import annotations

import random

from kernel import layout
from kernel.capabilities import Cut, Net
from kernel.nemesis import FaultPerf, NemesisContext, Plan, PlanWorld, victim
from kernel.system import Need
from nemesis.client_partition import ClientCuts

#: how long the requests are held at least: past the producers' produce deadline
#: (`workloads.txn.PRODUCE_TIMEOUT_MS`, 5 s on both backends), after which the producer aborts the
#: transaction itself — a coordinator's abort on the transaction timeout (10 s) would bump the
#: producer's epoch and fence the late write even without verification
HOLD_S = 7.0


class DelayedProduceFamily(ClientCuts):
    name: str = "delayed-produce"
    #: kind -> what one fault of it does (`chaos nemeses` lists these; the kinds are its keys)
    about: dict[str, str] = {
        "leader": "hold the clients' requests to one key's leader past the producers' produce timeout, "
                  "then deliver them (Bufstream's late write into the next transaction)",
    }
    kinds: tuple[str, ...] = tuple(about)
    perf: FaultPerf = FaultPerf("start-delayed-produce", "stop-delayed-produce", "delayed produce", "#D35400")
    composite: bool = False
    needs: tuple[type, ...] = (Net,)
    #: what every kind needs unless `requires` says more
    requires_all: tuple[Need, ...] = (Need("broker", "net"),)
    #: what each kind needs of the system under test (a role and a capability over it); a kind the
    #: chosen system cannot act out is refused before the run (`harness.registry`)
    requires: dict[str, tuple[Need, ...]] = {
    }

    def plan(self, kind: str, rng: random.Random, world: PlanWorld) -> Plan:
        return Plan({"victim": victim(kind, rng, world)}, {}, min_duration_s=HOLD_S)

    def cut(self, ctx: NemesisContext, node: str) -> Cut:
        """The victim's broker port only, and held: TCP delivers the requests when the cut lifts."""
        return Cut({node: [layout.CLIENTS]}, ports=(ctx.system.port("broker"),), hold=True)
