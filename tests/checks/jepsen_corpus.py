"""Jepsen's own Kafka checker tests, transcribed: every case of `kafka_test.clj` (jepsen-io/jepsen v0.3.11,
`jepsen/test/jepsen/tests/kafka_test.clj`) that checks an anomaly, present or absent, as a history of ours.

Transcription rules (the same for every case, so a case reads beside its Clojure original):
- keys `:x`, `:y` are 0 and 1; keyword values are their letter's place in the alphabet (`:a` 1, `:b` 2,
  ... `:g` 7), integer values stay as they are (the file never mixes a letter and an integer of the same
  number in one key, and where it seems to — `nonmonotonic-send-test` invokes sends of 1 and 2 that
  complete as `:a` and `:b` — the rule makes them equal);
- the ops keep their file order; `index` is renumbered densely (the file repeats some, and our histories
  need them increasing) and `time` follows it; each op keeps its process (`version-orders-test` gives
  none: each completion gets its own process and an invoke just before it, which the checker ignores);
- micro-ops are copied as they are: acknowledged sends without offsets, completions with more polls than
  their invoke, `info` and `fail` completions that carry what they read and wrote.

`CASES` maps a case name to (ops, the anomaly types our check reports, test.json or None, what the
Clojure test asserts). `WW_DEPS` names the cases Jepsen analyses with `{:ww-deps true}`.
"""

from __future__ import annotations

from typing import Any

x, y = 0, 1
a, b, c, d, e, f, g = 1, 2, 3, 4, 5, 6, 7
Op = tuple[Any, ...]


def o(process: int, typ: str, fn: str, value: Any) -> Op:
    return (process, typ, fn, value)


def S(k: int, v: Any) -> list[Any]:  # noqa: N802 - reads like Jepsen's [:send k v]
    return ["send", k, v]


def P(reads: dict[int, list[list[int]]] | None = None) -> list[Any]:  # noqa: N802 - Jepsen's [:poll ...]
    return ["poll"] if reads is None else ["poll", {str(k): v for k, v in reads.items()}]


def _version_orders_first() -> list[Op]:
    """No invokes and no processes in the original (a unit test of `version-orders`): each completion
    gets its own process and an invoke just before it."""
    return [o(0, "invoke", "txn", [P()]), o(0, "ok", "txn", [P({x: [[0, a], [1, b]]})]),
            o(1, "invoke", "txn", [S(x, c), S(x, b), S(x, d)]),
            o(1, "info", "txn", [S(x, [1, c]), S(x, [3, b]), S(x, [4, d])])]


def _inconsistent_info(with_poll: bool) -> list[Op]:
    ops = [o(0, "invoke", "send", [S(x, 1), S(y, 1)]), o(0, "info", "send", [S(x, [0, 1]), S(y, 1)]),
           o(1, "invoke", "send", [S(x, 2)]), o(1, "ok", "send", [S(x, [0, 2])])]
    if with_poll:
        ops += [o(2, "invoke", "poll", [P()]), o(2, "ok", "poll", [P({y: [[5, 1]]})])]
    return ops


def _lost_write_atomic(with_poll_a: bool) -> list[Op]:
    ops = [o(0, "invoke", "send", [S(x, a), S(y, b)]), o(0, "info", "send", [S(x, a), S(y, [0, b])]),
           o(1, "invoke", "send", [S(y, c)]), o(1, "info", "send", [S(y, c)])]
    if with_poll_a:
        ops += [o(2, "invoke", "poll", [P()]), o(2, "ok", "poll", [P({x: [[0, a]]})])]
    return ops + [o(3, "invoke", "poll", [P()]), o(3, "ok", "poll", [P({y: [[1, c]]})])]


def _poll_skip(middle: list[Op] | None = None, late: list[Op] | None = None) -> list[Op]:
    """`poll-skip-test`: ops in index order; `middle` at indices 4-5, `late` at 8-9."""
    return [o(0, "invoke", "poll", [P()]), o(0, "ok", "poll", [P({x: [[1, a], [2, b]]})]),
            o(1, "invoke", "poll", [P()]), o(1, "ok", "poll", [P({x: [[3, c]]})]),
            *(middle or []),
            o(0, "invoke", "poll", [P()]), o(0, "ok", "poll", [P({x: [[4, d]]})]),
            *(late or []),
            o(2, "invoke", "send", [S(x, f)]), o(2, "ok", "send", [S(x, [6, f])]),
            o(0, "invoke", "poll", [P()]), o(0, "ok", "poll", [P({x: [[7, g]]})]),
            o(3, "invoke", "send", [S(x, a), S(x, b), S(x, c), S(x, d), S(x, g)]),
            o(3, "info", "send", [S(x, a), S(x, b), S(x, c), S(x, d), S(x, g)])]


def _sub(fn: str, keys: list[int], typ: str = "ok") -> list[Op]:
    return [o(0, "invoke", fn, keys), o(0, typ, fn, keys)]


def _txn_abort(tail: list[Op], n: int) -> list[Op]:
    return [o(0, "invoke", "send", [S(x, i) for i in range(n)]),
            o(0, "ok", "send", [S(x, [i, i]) for i in range(n)]),
            o(1, "invoke", "txn", [P()]), o(1, "ok", "txn", [P({x: [[0, 0]]})]),
            o(1, "invoke", "txn", [P()]), o(1, "fail", "txn", [P({x: [[1, 1], [2, 2]]})]),
            *tail]


def _nonmonotonic_poll(middle: list[Op] | None = None) -> list[Op]:
    return [o(0, "invoke", "send", [S(x, a), S(x, b), S(x, c), S(x, d)]),
            o(0, "ok", "send", [S(x, a), S(x, b), S(x, c), S(x, d)]),
            o(0, "invoke", "poll", [P()]), o(0, "ok", "poll", [P({x: [[1, a], [2, b], [3, c]]})]),
            *(middle or []),
            o(0, "invoke", "poll", [P()]), o(0, "ok", "poll", [P({x: [[2, b], [3, c], [4, d]]})])]


def _nonmonotonic_send(middle: list[Op] | None = None) -> list[Op]:
    return [o(0, "invoke", "send", [S(x, c), S(x, d)]), o(0, "ok", "send", [S(x, [3, c]), S(x, [4, d])]),
            *(middle or []),
            o(0, "invoke", "send", [S(x, 1), S(x, 2)]), o(0, "ok", "send", [S(x, [1, a]), S(x, [2, b])])]


def _hash_insensitive() -> list[Op]:
    ops: list[Op] = []
    for v in range(10):
        ops += [o(0, "invoke", "send", [S(x, v)]), o(0, "ok", "send", [S(x, [0, v])]),
                o(1, "invoke", "poll", [P()]), o(1, "ok", "poll", [P({x: [[1, v]]})])]
    return ops


SUBSCRIBE = {"config": {"sub_via": ["subscribe"]}, "complete": True}

#: name -> (ops, anomaly types we report, test.json, what the Clojure test asserts)
CASES: dict[str, tuple[list[Op], list[str], dict[str, Any] | None, str]] = {
    "version-orders": (_version_orders_first(), ["G1c-realtime", "duplicate", "inconsistent-offsets", "unexpected"],
                       None,
                       "inconsistent-offsets at x offset 1 (b, c): the info txn's sends count, a read proves it"),
    "version-orders-real-world": (
        [o(379, "invoke", "send", [S(11, 641)]), o(379, "ok", "send", [S(11, [537, 641])]),
         o(363, "invoke", "send", [S(11, 645)]), o(363, "ok", "send", [S(11, [537, 645])])],
        ["inconsistent-offsets", "unseen"], None, "inconsistent-offsets at key 11 offset 537 (641, 645)"),
    "inconsistent-offsets-info-conflict": (_inconsistent_info(False), ["unseen"], None,
                                            "no inconsistent-offsets: the info send need not have committed"),
    "inconsistent-offsets-info-proven": (_inconsistent_info(True), ["inconsistent-offsets", "unseen"], None,
                                          "inconsistent-offsets at x offset 0 (1, 2): a read proves the info send"),
    "g1a": ([o(0, "invoke", "send", [S(x, 2), S(y, 3)]), o(0, "fail", "send", [S(x, 2), S(y, 3)]),
             o(1, "invoke", "poll", [P()]), o(1, "ok", "poll", [P({x: [[0, 2]]})])], ["G1a"], None,
            "G1a: the failed send of 2 to x was read"),
    "lost-write-consistent": (
        [o(0, "invoke", "send", [S(x, a)]), o(0, "ok", "send", [S(x, [0, a])]),
         o(0, "invoke", "send", [S(x, b), S(x, d)]), o(0, "ok", "send", [S(x, [1, b]), S(x, [3, d])]),
         o(1, "invoke", "send", [S(x, c)]), o(1, "info", "send", [S(x, c)]),
         o(0, "invoke", "poll", [P()]), o(0, "ok", "poll", [P({x: [[2, c]]})])],
        ["G0", "int-send-skip", "lost-write", "unseen"], None, "lost-write of a and b (index 0, 1; max read index 2)"),
    "lost-write-inconsistent": (
        [o(0, "invoke", "send", [S(x, a)]), o(0, "ok", "send", [S(x, [0, a])]),
         o(0, "invoke", "send", [S(x, b), S(x, c)]), o(0, "ok", "send", [S(x, [0, b]), S(x, [2, c])]),
         o(0, "invoke", "poll", [P()]), o(0, "ok", "poll", [P({x: [[0, b], [2, c]]})])],
        ["inconsistent-offsets", "lost-write", "nonmonotonic-send"], None, "lost-write of a, although b won offset 0"),
    "lost-write-atomic-unproven": (_lost_write_atomic(False), [], None,
                                   "no lost-write: nothing proves the info send of b committed"),
    "lost-write-atomic-proven": (_lost_write_atomic(True), ["lost-write"], None,
                                 "lost-write of b: a read of a proves its info send committed"),
    "poll-skip": (_poll_skip(), ["G0", "G1c-realtime", "int-send-skip", "lost-write", "poll-skip"], None,
                  "poll-skip over c and over f"),
    "poll-skip-subscribe-other-key": (
        _poll_skip(_sub("subscribe", [y]), _sub("assign", [y], "info")),
        ["G0", "G1c-realtime", "int-send-skip", "lost-write"], None,
        "no poll-skip: x left the assignment in between"),
    "poll-skip-subscribe-same-key": (
        _poll_skip(_sub("subscribe", [x, y]), _sub("assign", [x, y])),
        ["G0", "G1c-realtime", "int-send-skip", "lost-write", "poll-skip"], None,
        "poll-skip over c and over f: x stayed assigned"),
    "poll-skip-txn-abort-good": (
        _txn_abort([o(1, "invoke", "txn", [P()]), o(1, "info", "txn", [P({x: [[1, 1], [2, 2]]})]),
                    o(1, "invoke", "txn", [P()]), o(1, "ok", "txn", [P({x: [[1, 1], [2, 2]]})])], 3),
        [], None, "no anomaly: aborted and indeterminate polls rewind"),
    "poll-skip-txn-abort-no-rollback": (
        _txn_abort([o(1, "invoke", "txn", [P()]), o(1, "fail", "txn", [P({x: [[3, 3], [4, 4]]})]),
                    o(1, "invoke", "txn", [P()]), o(1, "ok", "txn", [P({x: [[5, 5]]})])], 6),
        ["lost-write", "poll-skip"], None, "poll-skip: a failed poll and an ok one start past the last ok poll"),
    "poll-skip-txn-abort-info": (
        _txn_abort([o(1, "invoke", "txn", [P()]), o(1, "info", "txn", [P({x: [[3, 3], [4, 4]]})])], 6),
        ["poll-skip", "unseen"], None, "poll-skip: an info poll starts past the last ok poll"),
    "nonmonotonic-poll": (_nonmonotonic_poll(), ["nonmonotonic-poll"], None, "nonmonotonic-poll c then b"),
    "nonmonotonic-poll-subscribe-other-key": (_nonmonotonic_poll(_sub("subscribe", [y])), [], None,
                                              "no nonmonotonic-poll after subscribing to y only"),
    "nonmonotonic-poll-assign-other-key": (_nonmonotonic_poll(_sub("assign", [y])), [], None,
                                           "no nonmonotonic-poll after assigning y only"),
    "nonmonotonic-poll-subscribe-same-key": (_nonmonotonic_poll(_sub("subscribe", [x, y])), ["nonmonotonic-poll"],
                                             None, "nonmonotonic-poll: x stayed subscribed"),
    "nonmonotonic-poll-assign-same-key": (_nonmonotonic_poll(_sub("assign", [x, y])), ["nonmonotonic-poll"], None,
                                          "nonmonotonic-poll: x stayed assigned"),
    "nonmonotonic-send": (_nonmonotonic_send(), ["G0-realtime", "nonmonotonic-send", "unseen"], None,
                          "nonmonotonic-send d then a"),
    "nonmonotonic-send-subscribe-other-key": (_nonmonotonic_send(_sub("subscribe", [y])), ["G0-realtime", "unseen"],
                                              None,
                                              "no nonmonotonic-send after subscribing to y only"),
    "nonmonotonic-send-assign-other-key": (_nonmonotonic_send(_sub("assign", [y], "info")), ["G0-realtime", "unseen"],
                                           None,
                                           "no nonmonotonic-send after an info assign of y only"),
    "nonmonotonic-send-subscribe-same-key": (_nonmonotonic_send(_sub("subscribe", [x, y])),
                                             ["G0-realtime", "nonmonotonic-send", "unseen"], None,
                                             "nonmonotonic-send: x stayed subscribed"),
    "nonmonotonic-send-assign-same-key": (_nonmonotonic_send(_sub("assign", [x, y])),
                                          ["G0-realtime", "nonmonotonic-send", "unseen"], None,
                                          "nonmonotonic-send: x stayed assigned"),
    "int-poll-skip": (
        [o(1, "invoke", "send", [S(x, a), S(x, b), S(x, d)]), o(1, "info", "send", [S(x, a), S(x, b), S(x, d)]),
         o(0, "invoke", "poll", [P()]), o(0, "ok", "poll", [P({x: [[1, a], [4, d]]})]),
         o(0, "invoke", "poll", [P(), P()]), o(0, "ok", "poll", [P({x: [[1, a]]}), P({x: [[4, d]]})]),
         o(0, "invoke", "poll", [P()]), o(0, "ok", "poll", [P({x: [[2, b]]})])],
        ["int-poll-skip", "nonmonotonic-poll"], None, "int-poll-skip a to d, within one poll and across two"),
    "int-send-skip": (
        [o(0, "invoke", "send", [S(x, a), S(x, c)]), o(0, "ok", "send", [S(x, [1, a]), S(x, c)]),
         o(1, "invoke", "send", [S(x, b)]), o(1, "info", "send", [S(x, b)]),
         o(2, "invoke", "poll", [P()]), o(2, "ok", "poll", [P({x: [[2, b], [3, c]]})])],
        ["G0", "int-send-skip", "lost-write"], None, "int-send-skip a to c (c's offset known only from a poll)"),
    "int-nonmonotonic-poll": (
        [o(0, "invoke", "send", [S(x, a), S(x, b), S(x, c)]), o(0, "info", "send", [S(x, a), S(x, b), S(x, c)]),
         o(0, "invoke", "poll", [P()]), o(0, "ok", "poll", [P({x: [[3, c], [1, a]]})]),
         o(0, "invoke", "poll", [P()]), o(0, "ok", "poll", [P({x: [[2, b], [3, c]]}), P({x: [[3, c]]})])],
        ["int-nonmonotonic-poll"], None,
        "int-nonmonotonic-poll c then a, and c then c (a completion with more polls than its invoke)"),
    "int-nonmonotonic-send": (
        [o(0, "invoke", "send", [S(x, 3), S(x, 1)]), o(0, "ok", "send", [S(x, [3, c]), S(x, [1, a])]),
         o(0, "invoke", "send", [S(y, d), S(y, b)]), o(0, "info", "send", [S(y, d), S(y, b)]),
         o(1, "invoke", "send", [S(y, c)]), o(1, "info", "send", [S(y, c)]),
         o(0, "invoke", "poll", [P()]), o(0, "ok", "poll", [P({y: [[2, b], [3, c], [4, d]]})])],
        ["G0", "int-nonmonotonic-send", "unseen"], None, "int-nonmonotonic-send c then a on x, d then b on y"),
    "duplicate": (
        [o(0, "invoke", "send", [S(x, a)]), o(0, "ok", "send", [S(x, [1, a])]),
         o(1, "invoke", "send", [S(x, b)]), o(1, "info", "send", [S(x, b)]),
         o(2, "invoke", "poll", [P()]), o(2, "ok", "poll", [P({x: [[2, b], [3, a]]})])],
        ["G0", "duplicate"], None, "duplicate: a at offsets 1 and 3"),
    "duplicate-hash-insensitive": (_hash_insensitive(),
                                   ["duplicate", "inconsistent-offsets", "nonmonotonic-poll", "nonmonotonic-send"],
                                   None,
                                   "every value a duplicate; inconsistent-offsets at offsets 0 and 1"),
    "duplicate-aborted-txn": (
        [o(0, "invoke", "send", [S(x, 0)]), o(0, "ok", "send", [S(x, [1, 0])]),
         o(0, "invoke", "send", [S(x, 1)]), o(0, "fail", "send", [S(x, [2, 1])]),
         o(1, "invoke", "poll", [P()]), o(1, "fail", "poll", [P({x: [[11, 0], [12, 1]]})])],
        ["duplicate", "unseen"], None, "duplicate of 0 (offsets 1 and 11), not of 1: a failed poll's reads count"),
    "realtime-lag": (
        [o(0, "invoke", "assign", [x]), o(0, "ok", "assign", [x]),
         o(0, "invoke", "poll", [P()]), o(0, "ok", "poll", [P({x: []})]),
         o(0, "invoke", "send", [S(x, a)]), o(0, "ok", "send", [S(x, [0, a])]),
         o(0, "invoke", "poll", [P()]), o(0, "ok", "poll", [P({x: []})]),
         o(1, "invoke", "send", [S(x, c), S(x, d)]), o(1, "ok", "send", [S(x, [2, c]), S(x, [3, d])]),
         o(0, "invoke", "poll", [P()]), o(0, "ok", "poll", [P()]),
         o(0, "invoke", "poll", [P()]), o(0, "ok", "poll", [P({x: [[0, a], [1, b]]})]),
         o(0, "invoke", "assign", [x, y]), o(0, "ok", "assign", [x, y]),
         o(0, "invoke", "poll", [P()]), o(0, "ok", "poll", [P({})]),
         o(0, "invoke", "assign", [y]), o(0, "ok", "assign", [y]),
         o(0, "invoke", "assign", [x]), o(0, "ok", "assign", [x]),
         o(0, "invoke", "poll", [P()]), o(0, "ok", "poll", [P({})]),
         o(0, "invoke", "poll", [P(), P()]), o(0, "ok", "poll", [P({x: [[0, a], [1, b]]}), P({x: [[2, c], [3, d]]})]),
         o(1, "invoke", "send", [S(x, b)]), o(1, "info", "send", [S(x, b)])],
        ["G0-realtime", "G1c-realtime", "nonmonotonic-send"], None,
        "no anomaly asserted (the test measures lag); an ok poll without a result, two polls in one op"),
    "empty-history": ([o(0, "invoke", "assign", [x]), o(0, "ok", "assign", [x])], ["empty-transaction-graph"],
                      None, "not valid: nothing was sent or polled"),
    "unseen": (
        [o(0, "invoke", "poll", [P()]), o(0, "ok", "poll", [P({})]),
         o(0, "invoke", "send", [S(x, a), S(x, b)]), o(0, "ok", "send", [S(x, [0, a]), S(x, [1, b])]),
         o(0, "invoke", "poll", [P()]), o(0, "ok", "poll", [P({x: [[0, a]]})]),
         o(0, "invoke", "poll", [P()]), o(0, "ok", "poll", [P({x: [[1, b]]})])],
        [], None, "nothing unseen at the end (a then b polled)"),
    "g0": (
        [o(0, "invoke", "send", [S(x, a), S(y, a)]), o(1, "invoke", "send", [S(x, b), S(y, b)]),
         o(0, "ok", "send", [S(x, [0, a]), S(y, [1, a])]), o(1, "ok", "send", [S(x, [1, b]), S(y, [0, b])])],
        ["G0", "unseen"], None, "G0: a before b on x, b before a on y (with ww-deps)"),
    "g1c-pure-wr": (
        [o(0, "invoke", "txn", [S(x, a), P()]), o(1, "invoke", "txn", [S(y, b), P()]),
         o(0, "ok", "txn", [S(x, [0, a]), P({y: [[0, b]]})]), o(1, "ok", "txn", [S(y, [0, b]), P({x: [[0, a]]})])],
        ["G1c"], None, "G1c: each transaction read the other's send"),
    "g1c-ww-wr": (
        [o(0, "invoke", "txn", [S(x, a), S(y, c)]), o(1, "invoke", "txn", [P(), S(y, b)]),
         o(0, "ok", "txn", [S(x, [0, a]), S(y, [2, c])]), o(1, "ok", "txn", [P({x: [[0, a]]}), S(y, [1, b])])],
        ["G1c", "unseen"], None, "G1c: t2 read t1's a, t2's b precedes t1's c (with ww-deps)"),
    "precommitted-read": (
        [o(0, "invoke", "txn", [S(x, a), P()]), o(0, "ok", "txn", [S(x, [0, a]), P({x: [[0, a]]})])],
        ["precommitted-read"], None, "precommitted-read: the transaction polled its own send"),
}

#: the cases Jepsen's test analyses with `{:ww-deps true}` (write-write edges from offsets)
WW_DEPS = frozenset({"g0", "g1c-ww-wr"})
