"""What a well-formed history line is, checked field by field.

Every check names what was wrong, so the reader can say "line 812: value[0][2] of an ok send must
be [offset, value], not 'abc'". Numbers must be JSON integers within a signed 64-bit long (what
Spark and Jepsen hold): a float, a string, a bool, NaN or 10^30 where an integer belongs is a bad
line, never a null that silently drops the op.
"""

from __future__ import annotations

from typing import Any

from kernel.history.op import CLIENT_FS, KEY_FS, MOP_FS, NEMESIS, OTHER_FS, Op, OpType

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)
KEY_MAX = 2**31 - 1
TYPES = frozenset(t.value for t in OpType)
CORE = ("index", "time", "process", "type", "f", "value")


class LineProblem(ValueError):
    """One line does not match the schema; the message says where and why."""


def _int(x: Any, what: str, lo: int = 0, hi: int = INT64_MAX) -> int:
    if type(x) is not int:
        raise LineProblem(f"{what} must be an integer, not {_show(x)}")
    if not lo <= x <= hi:
        raise LineProblem(f"{what} {x} is out of range [{lo}, {hi}]")
    return x


def _show(x: Any) -> str:
    text = repr(x)
    return text if len(text) <= 40 else text[:37] + "..."


def _key(x: Any, what: str) -> int:
    return _int(x, what, 0, KEY_MAX)


def _key_text(k: str) -> bool:
    """A poll map's key as JSON object keys carry it: a key number's plain decimal digits."""
    return k.isascii() and k.isdigit() and len(k) <= 10 and int(k) <= KEY_MAX and not (len(k) > 1 and k[0] == "0")


def _key_map(x: Any, what: str, shape: str) -> list[tuple[str, Any]]:
    """The entries of a map keyed by key numbers (a poll's result, `offsets`, `group-offsets`), or
    LineProblem naming the first thing wrong with the map itself; `shape` says what it maps to."""
    if not isinstance(x, dict):
        raise LineProblem(f"{what} must be a map of key -> {shape}, not {_show(x)}")
    for k in x:
        if not _key_text(k):
            raise LineProblem(f"{what} has key {k!r}, which is not a key number")
    return list(x.items())


def _poll_map(x: Any, what: str) -> None:
    for k, pairs in _key_map(x, what, "[[offset, value], ...]"):
        if not isinstance(pairs, list):
            raise LineProblem(f"{what}[{k!r}] must be a list of [offset, value] pairs, not {_show(pairs)}")
        for i, p in enumerate(pairs):
            if not isinstance(p, list) or len(p) != 2:
                raise LineProblem(f"{what}[{k!r}][{i}] must be an [offset, value] pair, not {_show(p)}")
            _int(p[0], f"{what}[{k!r}][{i}] offset")
            _int(p[1], f"{what}[{k!r}][{i}] value", INT64_MIN)


def _mop(m: Any, where: str, invoke: bool, f: str) -> None:
    """One micro-op, in an invoke (`invoke`) or in any completion (ok, info or fail: Jepsen's
    completions all carry what they sent and read, and an offset is known only where it is written)."""
    if not isinstance(m, list) or not m or m[0] not in ("send", "poll"):
        name = f" {m[0]!r}" if isinstance(m, list) and m and isinstance(m[0], str) else ""
        raise LineProblem(f"{where} is an unknown micro-op{name}: it must be a micro-op ['send', key, value] "
                          f"or ['poll', ...], not {_show(m)}")
    if f != "txn" and m[0] != f:
        raise LineProblem(f"{where} is a {m[0]!r} micro-op inside a {f!r} op (mixed micro-ops need f 'txn')")
    if m[0] == "send":
        if len(m) != 3:
            raise LineProblem(f"{where} must be ['send', key, value], not {_show(m)}")
        _key(m[1], f"{where} key")
        arg = m[2]
        if isinstance(arg, list):
            if len(arg) != 2:
                raise LineProblem(f"{where} must be ['send', key, value] or ['send', key, [offset, value]], "
                                  f"not {_show(m)}")
            if arg[0] is not None:
                _int(arg[0], f"{where} offset")
            _int(arg[1], f"{where} value", INT64_MIN)
        else:
            _int(arg, f"{where} value", INT64_MIN)
        return
    if len(m) == 1 or (len(m) == 2 and m[1] is None):
        return
    if invoke:
        raise LineProblem(f"{where} of an invoke must be ['poll'] (what it read belongs in the completion), "
                          f"not {_show(m)}")
    if len(m) != 2:
        raise LineProblem(f"{where} must be ['poll'] or ['poll', {{key: [[offset, value], ...]}}], not {_show(m)}")
    _poll_map(m[1], f"{where} result")


def _rebalance_log(log: Any) -> None:
    """`rebalance-log`: the rebalances during a poll, `[{"revoked": [keys], "assigned": [keys]}, ...]`
    (Jepsen's own histories name the keys as `"keys"`)."""
    if not isinstance(log, list):
        raise LineProblem(f"rebalance-log must be a list of rebalances, not {_show(log)}")
    for i, event in enumerate(log):
        if not isinstance(event, dict):
            raise LineProblem(f"rebalance-log[{i}] must be an object like {{\"revoked\": [...], \"assigned\": [...]}}, "
                              f"not {_show(event)}")
        for name in ("revoked", "assigned", "keys"):
            keys = event.get(name, [])
            if not isinstance(keys, list):
                raise LineProblem(f"rebalance-log[{i}].{name} must be a list of keys, not {_show(keys)}")
            for j, k in enumerate(keys):
                _key(k, f"rebalance-log[{i}].{name}[{j}]")


#: the fields of a consume-transform-produce transaction (kernel/history/README.md, "Exactly-once")
CTP_FIELDS = frozenset(("ctp", "sources", "offsets", "fenced", "group-offsets"))


def _offset_map(x: Any, what: str) -> None:
    """key -> offset, as `commits` and `fetched-commits` carry them."""
    for k, o in _key_map(x, what, "offset"):
        _int(o, f"{what}[{k!r}]")


def _ctp_fields(d: dict[str, Any], typ: OpType, f: Any) -> None:
    """A ctp transaction's own fields, on their own line: `ctp` marks a txn op whose sends are
    decided by what it reads (so its invoke holds polls only); `sources` names, per send of a
    completion, the input record it transforms; `offsets` what the transaction added of the group's
    offsets, `fenced` a completion whose producer was fenced. `group-offsets` is the group's
    committed offsets as a final op read them at the end."""
    if "ctp" in d:
        if d["ctp"] is not True or f != "txn":
            raise LineProblem(f"ctp must be true, on a txn op only (here {_show(d['ctp'])} on f {_show(f)})")
        if typ is OpType.INVOKE and any(isinstance(m, list) and m[:1] == ["send"] for m in d["value"]):
            raise LineProblem("a ctp invoke holds polls only: what it sends is decided by what it reads")
    elif {"sources", "offsets", "fenced"} & d.keys():
        raise LineProblem("sources, offsets and fenced belong to a ctp transaction (\"ctp\": true)")
    if typ is OpType.INVOKE and (CTP_FIELDS - {"ctp"}) & d.keys():
        raise LineProblem("an invoke carries no sources, offsets, fenced or group-offsets: they are outcomes")
    if "sources" in d:
        srcs = d["sources"]
        if not isinstance(srcs, list):
            raise LineProblem(f"sources must be a list of [key, offset] (one per send), not {_show(srcs)}")
        for i, src in enumerate(srcs):
            if not isinstance(src, list) or len(src) != 2:
                raise LineProblem(f"sources[{i}] must be [key, offset], not {_show(src)}")
            _key(src[0], f"sources[{i}] key")
            _int(src[1], f"sources[{i}] offset")
        sends = sum(1 for m in d["value"] if m[0] == "send")
        if len(srcs) != sends:
            raise LineProblem(f"sources names {len(srcs)} input records for {sends} sends: one per send, in order")
    if "offsets" in d:
        _offset_map(d["offsets"], "offsets")
    if "fenced" in d and (type(d["fenced"]) is not bool or (d["fenced"] and typ is not OpType.FAIL)):
        raise LineProblem(f"fenced must be true or false, and true only on a fail completion (a fence that "
                          f"answered the commit request leaves the outcome unknown: info without fenced), "
                          f"not {_show(d['fenced'])} on {typ.value}")
    if "group-offsets" in d:
        if d.get("final") is not True:
            raise LineProblem("group-offsets belongs on a final op (the group's offsets after every transaction)")
        _offset_map(d["group-offsets"], "group-offsets")


def send_value(m: list[Any]) -> Any:
    """The value a send micro-op carries, in its invoke form (`['send', k, v]`) or ok form (`[o, v]`)."""
    return m[2][1] if isinstance(m[2], list) else m[2]


_OP_TYPES = {t.value: t for t in OpType}


def _ints(xs: Any, lo: int, hi: int) -> bool:
    """Every element an integer (not a bool) within [lo, hi], tested in C loops, not per element."""
    return not xs or (set(map(type, xs)) == {int} and lo <= min(xs) and max(xs) <= hi)


def _int_in(x: Any, lo: int, hi: int) -> bool:
    return type(x) is int and lo <= x <= hi


def _fast_mop(m: Any, f: str, invoke: bool) -> bool:
    if type(m) is not list or not m:
        return False
    kind = m[0]
    if kind != f and not (f == "txn" and (kind == "send" or kind == "poll")):
        return False
    if kind == "send":
        if len(m) != 3 or not _int_in(m[1], 0, KEY_MAX):
            return False
        arg = m[2]
        if type(arg) is list:
            return (len(arg) == 2 and (arg[0] is None or _int_in(arg[0], 0, INT64_MAX))
                    and _int_in(arg[1], INT64_MIN, INT64_MAX))
        return _int_in(arg, INT64_MIN, INT64_MAX)
    if len(m) == 1 or (len(m) == 2 and m[1] is None):
        return True
    if invoke or len(m) != 2 or type(m[1]) is not dict:
        return False
    for k, pairs in m[1].items():
        if not _key_text(k):
            return False
        if type(pairs) is not list:
            return False
        if pairs:
            if set(map(type, pairs)) != {list} or set(map(len, pairs)) != {2}:
                return False
            offsets, values = zip(*pairs, strict=True)
            if not (_ints(offsets, 0, INT64_MAX) and _ints(values, INT64_MIN, INT64_MAX)):
                return False
    return True


def _fast_line(d: Any) -> Op | None:
    """The common well-formed client line (send, poll, txn, assign or subscribe, no extras but
    `final`), checked with bulk tests in C; None for anything else, which `checked_line` then checks
    field by field. It only ever accepts what the field-by-field check accepts, with the same op
    (tests/history/test_schema_fast.py); it exists because that check, one Python call per number,
    was most of the cost of reading a large history."""
    if type(d) is not dict or len(d) != 6 + ("final" in d):
        return None
    index, time, process, f, value = d.get("index"), d.get("time"), d.get("process"), d.get("f"), d.get("value")
    if not (type(index) is int and type(time) is int and type(process) is int and type(f) is str
            and type(value) is list and 0 <= index <= INT64_MAX and 0 <= time <= INT64_MAX
            and 0 <= process <= INT64_MAX):
        return None
    typ = d.get("type")
    op_type = _OP_TYPES.get(typ) if type(typ) is str else None
    if op_type is None:
        return None
    extra: dict[str, Any] = {}
    if "final" in d:
        if type(d["final"]) is not bool:
            return None
        extra["final"] = d["final"]
    if f in KEY_FS:
        return Op(index, time, process, op_type, f, value, extra) if _ints(value, 0, KEY_MAX) else None
    if f not in MOP_FS or not value:
        return None
    invoke = op_type is OpType.INVOKE
    for m in value:
        if not _fast_mop(m, f, invoke):
            return None
    return Op(index, time, process, op_type, f, value, extra)


def check_line(d: Any) -> Op:
    """The op a decoded line holds, or LineProblem. Checks this line alone (pairing is the reader's)."""
    fast = _fast_line(d)
    return fast if fast is not None else checked_line(d)


def checked_line(d: Any) -> Op:
    """`check_line` field by field, naming the first problem."""
    if not isinstance(d, dict):
        raise LineProblem(f"an op must be a JSON object, not {type(d).__name__}")
    missing = [k for k in CORE[:5] if k not in d]
    if missing:
        raise LineProblem(f"the op lacks {', '.join(missing)}")
    index = _int(d["index"], "index")
    time = _int(d["time"], "time")
    process = d["process"]
    if process != NEMESIS:
        _int(process, "process (an integer, or \"nemesis\")")
    if not isinstance(d["type"], str) or d["type"] not in TYPES:
        raise LineProblem(f"type {_show(d['type'])} is not one of invoke, ok, fail, info")
    typ = OpType(d["type"])
    f = d["f"]
    if not isinstance(f, str):
        raise LineProblem(f"f must be a string, not {_show(f)}")
    if "final" in d and type(d["final"]) is not bool:
        raise LineProblem(f"final must be true or false, not {_show(d['final'])}")
    extra = {k: v for k, v in d.items() if k not in CORE}
    if "rebalance-log" in d:
        _rebalance_log(d["rebalance-log"])
    if process == NEMESIS:
        return Op(index, time, process, typ, f, d.get("value"), extra)
    if f in OTHER_FS:
        if CTP_FIELDS & d.keys():
            _ctp_fields(d, typ, f)
        return Op(index, time, process, typ, f, d.get("value"), extra)
    if f not in CLIENT_FS:
        raise LineProblem(f"f {f!r} is not a client op ({', '.join(sorted(CLIENT_FS))})")
    if "value" not in d:
        raise LineProblem("a client op must have a value")
    value = d["value"]
    if f in KEY_FS:
        if not isinstance(value, list):
            raise LineProblem(f"the value of {f} must be a list of keys, not {_show(value)}")
        for i, k in enumerate(value):
            _key(k, f"value[{i}]")
        if CTP_FIELDS & d.keys():
            _ctp_fields(d, typ, f)
        return Op(index, time, process, typ, f, value, extra)
    if not isinstance(value, list) or not value:
        raise LineProblem(f"the value of {f} must be a non-empty list of micro-ops, not {_show(value)}")
    for i, m in enumerate(value):
        _mop(m, f"value[{i}]", typ is OpType.INVOKE, f)
    if CTP_FIELDS & d.keys():
        _ctp_fields(d, typ, f)
    return Op(index, time, process, typ, f, value, extra)


def _sends(value: list[Any]) -> list[tuple[int, int, Any]]:
    """(position, key, value) of each send micro-op."""
    return [(i, m[1], send_value(m)) for i, m in enumerate(value) if m[0] == "send"]


def check_completion(invoke: Op, done: Op, invoked_at: int) -> None:
    """A completion must complete *its* invoke: the same f, and for a send, poll or txn op the same
    sends (key and value, in order). Its polls may differ from the invoke's, as Jepsen's own tests
    write them (an invoke's one `["poll"]` may complete as two polls' results); an offset appears
    only in the completion. A completion cannot send what its invoke did not, nor drop a send."""
    if done.f != invoke.f:
        raise LineProblem(f"completes a {invoke.f!r} invoke (line {invoked_at}) with f {done.f!r}")
    if done.f in OTHER_FS:
        return
    if invoke.extra.get("ctp") is not done.extra.get("ctp"):
        raise LineProblem(f"completes {'a ctp' if invoke.extra.get('ctp') else 'a plain'} invoke (line {invoked_at}) "
                          f"as {'a ctp' if done.extra.get('ctp') else 'a plain'} transaction")
    if done.extra.get("ctp"):  # its sends were decided by its reads: any, each with its source
        if "sources" not in done.extra and _sends(done.value):
            raise LineProblem("a ctp completion that sends must name each send's input record (sources)")
        return
    if done.f in KEY_FS:
        if done.value != invoke.value:
            raise LineProblem(f"{done.f} completes with keys {_show(done.value)} "
                              f"but was invoked with {_show(invoke.value)}")
        return
    want, got = _sends(invoke.value), _sends(done.value)
    for n, (i, k, v) in enumerate(got):
        if n >= len(want) or (want[n][1], want[n][2]) != (k, v):
            if (k, v) not in {(wk, wv) for _, wk, wv in want}:
                raise LineProblem(f"value[{i}] sends {v} to key {k}, which its invoke (line {invoked_at}) did not "
                                  "send: a completion holds the sends of its invoke, no others")
            raise LineProblem(f"value[{i}] sends {v} to key {k} out of the order of its invoke (line {invoked_at})")
    if len(got) < len(want):
        _, k, v = want[len(got)]
        raise LineProblem(f"completes without the send of {v} to key {k} that its invoke (line {invoked_at}) made")
