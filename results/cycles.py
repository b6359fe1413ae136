"""Dependency cycles between transactions: Jepsen's G0, G1c and their real-time kinds, found by our own search.

Jepsen's Kafka checker (`jepsen.tests.kafka/cycles!`) builds a graph whose vertices are completed
operations (send, poll and txn ops of any outcome) and hands it to Elle's cycle search. Its edges:

- **ww** (write-write, only with `--ww-deps`): T1 sent v1 to key k and T2 sent v2 to k, v1 just before
  v2 in k's version order (offsets sorted, gaps removed);
- **wr** (write-read): T1 sent the value T2 polled;
- **rt** (real time, Elle's `realtime-graph`, since the checker asks for strict serializability): an ok
  op that completed before another op was invoked precedes it.

It draws no rw (anti-dependency) edges: that part of its code is commented out, since a poll returns a
batch-bounded prefix of a key, so not having read a later offset proves nothing. Neither do we, so
G-single and G2-item are never reported, as in Jepsen.

We always draw ww edges, and search twice (`find_cycles`): the graph with ww edges (what Jepsen
reports with `--ww-deps`) and without (what it reports by default). Per strongly connected component,
the name is Elle's, by its precedence (a found anomaly makes those it implies redundant): a cycle of ww
edges alone is `G0`; otherwise one of ww and wr edges is `G1c`, one of ww and rt edges `G0-realtime`
(both may be reported), and a component with neither is `G1c-realtime` (wr and rt edges both needed).
Which of them make a run invalid is Jepsen's rule: G0 never (Kafka does not isolate writes: a
transaction's sends are ordered when they are sent, not when it commits); G1c and G1c-realtime only
when the cycle needs no ww edge — what Jepsen's checker finds without `--ww-deps` (it allows every
G1c with them). `without_ww` counts those.

Real time is encoded without Elle's n-times-concurrency edges: a chain of one node per history index
at which a send/poll/txn op was invoked or completed ok, each node linked to the next; an ok op links
to the chain at its completion and the chain links, at an op's invoke, to that op. A path through the
chain from A to B exists exactly when A completed ok before B was invoked, so the components are the
same as with Elle's reduced real-time graph. Strongly connected components are scipy's (C); only the
few nontrivial ones are searched further, and one cycle of each finding is spelled out as an example.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

WW, WR, RT = 0, 1, 2
RELS = ("ww", "wr", "rt")
#: every cycle anomaly this module reports, in report order
CYCLE_TYPES = ("G0", "G1c", "G0-realtime", "G1c-realtime")
EXAMPLES = 8


@dataclass
class Ops:
    """The send/poll/txn completions of one history: completion index, invoke index, ok or not."""

    index: np.ndarray
    invoke: np.ndarray
    ok: np.ndarray


@dataclass
class Graph:
    """Nodes 0..n_ops-1 are ops (their history index in `op_index`), the rest real-time chain nodes."""

    n: int
    op_index: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    rel: np.ndarray


@dataclass
class Found:
    """One anomaly type's findings: how many components, how many of them need no ww edge, examples."""

    count: int = 0
    without_ww: int = 0
    examples: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "examples": self.examples, "without_ww": self.without_ww}


def build(src: np.ndarray, dst: np.ndarray, rel: np.ndarray, ops: Ops) -> Graph:
    """The graph of ww/wr edges between op indices (`src` -> `dst`, `rel` WW or WR) and the real-time
    order of `ops`."""
    src, dst, rel = (np.asarray(a, dtype=np.int64) for a in (src, dst, rel))
    op_index = np.unique(np.concatenate([src, dst, ops.index.astype(np.int64)]))
    n_ops = len(op_index)
    s = np.searchsorted(op_index, src)
    d = np.searchsorted(op_index, dst)
    events = np.unique(np.concatenate([ops.invoke[ops.ok], ops.index[ops.ok], ops.invoke]).astype(np.int64))
    n_chain = len(events)
    chain = n_ops + np.arange(n_chain, dtype=np.int64)
    node = np.searchsorted(op_index, ops.index)
    parts_s = [s, chain[:-1], node[ops.ok], chain[np.searchsorted(events, ops.invoke)]]
    parts_d = [d, chain[1:], chain[np.searchsorted(events, ops.index[ops.ok])], node]
    rels = [rel, np.full(n_chain - 1 if n_chain else 0, RT), np.full(int(ops.ok.sum()), RT), np.full(len(node), RT)]
    return Graph(n_ops + n_chain, op_index, np.concatenate(parts_s), np.concatenate(parts_d),
                 np.concatenate(rels).astype(np.int8))


def cyclic_ops(g: Graph) -> np.ndarray:
    """The op indices of the graph's nontrivial strongly connected components (the only ops a cycle
    can pass through)."""
    labels, on_cycle = _cyclic(g.n, g.src, g.dst)
    nodes = np.unique(np.concatenate([g.src[on_cycle], g.dst[on_cycle]]))
    return np.asarray(g.op_index[nodes[nodes < len(g.op_index)]])


def with_edges(g: Graph, src: np.ndarray, dst: np.ndarray, rel: np.ndarray) -> Graph:
    """`g` with more edges between its ops (op indices that must already be nodes of it)."""
    s = np.searchsorted(g.op_index, np.asarray(src, dtype=np.int64))
    d = np.searchsorted(g.op_index, np.asarray(dst, dtype=np.int64))
    return Graph(g.n, g.op_index, np.concatenate([g.src, s]), np.concatenate([g.dst, d]),
                 np.concatenate([g.rel, np.asarray(rel, dtype=np.int8)]))


def _scc(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Component label of every node (scipy's strongly connected components)."""
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    m = csr_matrix((np.ones(len(src), dtype=np.int8), (src, dst)), shape=(n, n))
    return connected_components(m, directed=True, connection="strong")[1]


def _cyclic(n: int, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(labels, mask of the edges that lie on a cycle: both ends in one component)."""
    labels = _scc(n, src, dst)
    return labels, (labels[src] == labels[dst]) & (src != dst)


def find_cycles(g: Graph) -> dict[str, Found]:
    """Every cycle anomaly of the graph, by type (only types found). `count` is the number of
    components named so, with ww edges (or without, where that finds more); `without_ww` those found
    without them; the examples show those first."""
    with_ww = _search(g, (WW, WR, RT))
    without = _search(g, (WR, RT))
    out: dict[str, Found] = {}
    for name in CYCLE_TYPES:
        a, b = without.get(name), with_ww.get(name)
        if not a and not b:
            continue
        n_a, n_b = (len(a.comps) if a else 0), (len(b.comps) if b else 0)
        examples = (a.examples(EXAMPLES) if a else []) + (b.examples(EXAMPLES - min(n_a, EXAMPLES)) if b else [])
        out[name] = Found(max(n_a, n_b), n_a, examples)
    return out


@dataclass
class _Hits:
    """The components one search named with one type, and what spelling out a cycle of each needs."""

    g: Graph
    src: np.ndarray  # the search's edges that lie on a cycle
    dst: np.ndarray
    rel: np.ndarray
    labels: np.ndarray
    rels: tuple[int, ...]  # the relations a cycle of this type is made of
    comps: list[int] = field(default_factory=list)

    def examples(self, n: int) -> list[dict[str, Any]]:
        out = []
        for c in self.comps[:max(n, 0)]:
            m = (self.labels[self.src] == c) & np.isin(self.rel, self.rels)
            out.append(_example(self.g, self.src[m], self.dst[m], self.rel[m]))
        return out


def _search(g: Graph, rels: tuple[int, ...]) -> dict[str, _Hits]:
    """Elle's names for the nontrivial components of the graph restricted to `rels`."""
    keep = np.isin(g.rel, rels)
    src, dst, rel = g.src[keep], g.dst[keep], g.rel[keep]
    labels, on_cycle = _cyclic(g.n, src, dst)
    if not on_cycle.any():
        return {}
    # from here on only the edges inside nontrivial components matter: usually a handful
    src, dst, rel = src[on_cycle], dst[on_cycle], rel[on_cycle]
    comps = np.unique(labels[src]).tolist()

    def named(allowed: tuple[int, ...]) -> set[int]:
        """The components holding a cycle made of `allowed` edges only."""
        m = np.isin(rel, allowed)
        if not m.any():
            return set()
        _, cyc = _cyclic(g.n, src[m], dst[m])
        return set(labels[src[m][cyc]].tolist())

    ww = WW in rels
    g0 = named((WW,)) if ww else set()
    g1c = (named((WW, WR)) - g0) if ww else named((WR,))
    g0rt = (named((WW, RT)) - g0) if ww else set()
    hits = {name: _Hits(g, src, dst, rel, labels, kinds) for name, kinds in
            [("G0", (WW,)), ("G1c", (WW, WR) if ww else (WR,)), ("G0-realtime", (WW, RT)), ("G1c-realtime", rels)]}
    for c in comps:
        if c in g0:
            hits["G0"].comps.append(c)
            continue
        if c in g1c:
            hits["G1c"].comps.append(c)
        if c in g0rt:
            hits["G0-realtime"].comps.append(c)
        if c not in g1c and c not in g0rt:
            hits["G1c-realtime"].comps.append(c)
    return {k: v for k, v in hits.items() if v.comps}


def _example(g: Graph, src: np.ndarray, dst: np.ndarray, rel: np.ndarray) -> dict[str, Any]:
    """One cycle among the given edges (one component's, of the type's relations): op indices and the
    relation of each step (a walk along the real-time chain is one `rt` step)."""
    out_edges: dict[int, list[tuple[int, int]]] = {}
    for a, b, r in zip(src.tolist(), dst.tolist(), rel.tolist(), strict=True):
        out_edges.setdefault(a, []).append((b, r))
    _, on_cycle = _cyclic(g.n, src, dst)
    # start from an edge that is not real time (the chain alone has no cycle, so one exists)
    order = np.argsort(rel == RT, kind="stable")
    first = next((i for i in order.tolist() if on_cycle[i]), None)
    if first is None:
        return {"cycle": [], "steps": []}
    a, b, r0 = int(src[first]), int(dst[first]), int(rel[first])
    prev: dict[int, tuple[int, int]] = {b: (-1, -1)}
    todo = deque([b])
    while todo and a not in prev:
        x = todo.popleft()
        for y, r in out_edges.get(x, ()):
            if y not in prev:
                prev[y] = (x, r)
                todo.append(y)
    path = [(a, r0)]
    x = a
    while x != b:
        px, r = prev[x]
        path.append((px, r))
        x = px
    path.reverse()  # b first: each node with the relation of the step that leaves it
    steps: list[tuple[int, str]] = []
    for node, r in path:
        if node < len(g.op_index):
            steps.append((int(g.op_index[node]), RELS[r]))
    cycle = [i for i, _ in steps]
    return {"cycle": [*cycle, cycle[0]], "steps": [s for _, s in steps]}
