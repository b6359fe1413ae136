"""What a workload is: a value, `Workload(name, client_factory, generator, final_generator)`.

Modelled on Jepsen's workload maps. A *generator* says what each worker does next (seeded, so the
sequence of invocations is a pure function of the seed); a *client* turns one invocation into calls
on a real client library and returns the completed op; the *final generator* runs after the heal,
as ordinary ops by fresh processes marked `"final": true` (the drain). The worker pool in the
orchestrator only plays ops: it knows nothing of sends, polls or keys. Adding a workload is one
file exporting a `Workload` plus one registry line.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from kernel.history.op import OpType
from kernel.node import Node
from kernel.spec import RunSpec


@dataclass(frozen=True, slots=True)
class Invocation:
    """What a generator asks a client to do: the op's `f` and `value` as the history records them."""

    f: str
    value: Any
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Completion:
    """How an invocation ended: `ok`, `fail` (certainly did not happen) or `info` (unknown), the
    completed value, and extra keys for the history (`error`, ...)."""

    type: OpType
    value: Any
    extra: Mapping[str, Any] = field(default_factory=dict)


#: the backend's way to a Kafka connection for one process (`workloads.kafka.KafkaConnection`):
#: librdkafka in containers, the simulated client in the simulator
Connect = Callable[["ClientContext", Node], Any]


@dataclass(frozen=True, slots=True)
class ClientContext:
    """What a client needs to connect: the run's settings, its process number, where brokers are,
    and the backend's `connect`."""

    spec: RunSpec
    process: int
    address_of: Callable[[Node], str]
    all_addresses: list[str]
    connect: Connect


class Client(Protocol):
    """One process's connection to the system under test (Jepsen's client.clj).

    `invoke` is a coroutine so one client serves both backends: in containers it runs on its
    worker's own thread and may block there; in the simulator its awaits are the network's."""

    def open(self, node: Node) -> None:
        """Connect, bootstrapping from `node` (chosen from the seed by the pool)."""
        ...

    async def invoke(self, op: Invocation) -> Completion:
        """Do the op and say how it ended. Never raise for an outcome: a timeout is `info`."""
        ...

    def close(self) -> None:
        """Release the connection; idempotent."""
        ...


class Generator(Protocol):
    """A seeded source of invocations for one worker (or the final drain)."""

    def next(self) -> Invocation | None:
        """The next invocation, or None when this generator is done."""
        ...

    def update(self, op: Invocation, done: Completion) -> None:
        """Hear how an invocation ended (the final drain stops once it has read everything)."""
        ...


@dataclass(frozen=True, slots=True)
class TxnSettings:
    """What both backends' transactional producers are given: the transaction timeout, how long a
    write is tried before the producer gives up and aborts (shorter: the producer, not the
    coordinator's timeout, ends a stuck transaction), and the transactional id of a process
    (`id_of(spec, process)`)."""

    timeout_ms: int
    produce_timeout_ms: int
    id_of: Callable[[RunSpec, int], str]


@dataclass(frozen=True)
class Workload:
    """A workload as a value. `generator(spec, worker)` and `final_generator(spec)` are seeded from
    `spec.seed` through `kernel.rng`; `final_generator` may be None (no drain)."""

    name: str
    client_factory: Callable[[ClientContext], Client]
    generator: Callable[[RunSpec, int], Generator]
    final_generator: Callable[[RunSpec], Generator] | None = None
    description: str = ""
    #: set when its client needs a transactional producer and a read_committed consumer: the
    #: backend's `connect` then hands out its `workloads.txn.TxnConnection`, set up from these
    transactional: TxnSettings | None = None
    #: the Kafka features its client needs of the brokers (`kernel.system.FEATURES`) beyond what the
    #: run's settings imply (a transactional workload needs transactions, a subscribing consumer
    #: consumer groups, an idempotent producer idempotence: `harness.registry.features_needed`)
    features: tuple[str, ...] = ()
