"""What a well-formed history line is, checked field by field.

Every check names what was wrong, so the reader can say "line 812: value[0][2] of an ok send must
be [offset, value], not 'abc'". Numbers must be JSON integers within a signed 64-bit long (what
Spark and Jepsen hold): a float, a string, a bool, NaN or 10^30 where an integer belongs is a bad
line, never a null that silently drops the op.
"""

from __future__ import annotations

from typing import Any

from kernel.history.op import CLIENT_FS, KEY_FS, NEMESIS, Op, OpType

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


def _poll_map(x: Any, what: str) -> None:
    if not isinstance(x, dict):
        raise LineProblem(f"{what} must be a map of key -> [[offset, value], ...], not {_show(x)}")
    for k, pairs in x.items():
        if not _key_text(k):
            raise LineProblem(f"{what} has key {k!r}, which is not a key number")
        if not isinstance(pairs, list):
            raise LineProblem(f"{what}[{k!r}] must be a list of [offset, value] pairs, not {_show(pairs)}")
        for i, p in enumerate(pairs):
            if not isinstance(p, list) or len(p) != 2:
                raise LineProblem(f"{what}[{k!r}][{i}] must be an [offset, value] pair, not {_show(p)}")
            _int(p[0], f"{what}[{k!r}][{i}] offset")
            _int(p[1], f"{what}[{k!r}][{i}] value", INT64_MIN)


def _mop(m: Any, where: str, completed_ok: bool, f: str) -> None:
    """One micro-op in its invoke form (`completed_ok` False) or its ok form."""
    if not isinstance(m, list) or not m or m[0] not in ("send", "poll"):
        raise LineProblem(f"{where} must be a micro-op ['send', key, value] or ['poll', ...], not {_show(m)}")
    if f != "txn" and m[0] != f:
        raise LineProblem(f"{where} is a {m[0]!r} micro-op inside a {f!r} op (mixed micro-ops need f 'txn')")
    if m[0] == "send":
        if len(m) != 3:
            raise LineProblem(f"{where} must be ['send', key, value], not {_show(m)}")
        _key(m[1], f"{where} key")
        arg = m[2]
        if completed_ok or isinstance(arg, list):
            if not isinstance(arg, list) or len(arg) != 2:
                raise LineProblem(f"{where} of an ok send must be ['send', key, [offset, value]], not {_show(m)}")
            if arg[0] is not None:
                _int(arg[0], f"{where} offset")
            _int(arg[1], f"{where} value", INT64_MIN)
        else:
            _int(arg, f"{where} value", INT64_MIN)
        return
    if completed_ok:
        if len(m) != 2:
            raise LineProblem(f"{where} of an ok poll must be ['poll', {{key: [[offset, value], ...]}}], "
                              f"not {_show(m)}")
        _poll_map(m[1], f"{where} result")
    elif len(m) != 1 and not (len(m) == 2 and m[1] is None):
        raise LineProblem(f"{where} of a poll that did not complete ok must be ['poll'], not {_show(m)}")


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


def send_value(m: list[Any]) -> Any:
    """The value a send micro-op carries, in its invoke form (`['send', k, v]`) or ok form (`[o, v]`)."""
    return m[2][1] if isinstance(m[2], list) else m[2]


_OP_TYPES = {t.value: t for t in OpType}


def _ints(xs: Any, lo: int, hi: int) -> bool:
    """Every element an integer (not a bool) within [lo, hi], tested in C loops, not per element."""
    return not xs or (set(map(type, xs)) == {int} and lo <= min(xs) and max(xs) <= hi)


def _int_in(x: Any, lo: int, hi: int) -> bool:
    return type(x) is int and lo <= x <= hi


def _fast_mop(m: Any, f: str, ok: bool) -> bool:
    if type(m) is not list or not m or m[0] != f:
        return False
    if f == "send":
        if len(m) != 3 or not _int_in(m[1], 0, KEY_MAX):
            return False
        arg = m[2]
        if type(arg) is list:
            return (len(arg) == 2 and (arg[0] is None or _int_in(arg[0], 0, INT64_MAX))
                    and _int_in(arg[1], INT64_MIN, INT64_MAX))
        return not ok and _int_in(arg, INT64_MIN, INT64_MAX)
    if not ok:
        return len(m) == 1 or (len(m) == 2 and m[1] is None)
    if len(m) != 2 or type(m[1]) is not dict:
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
    """The common well-formed client line (send, poll, assign or subscribe, no extras but `final`),
    checked with bulk tests in C; None for anything else, which `checked_line` then checks field by
    field. It only ever accepts what the field-by-field check accepts, with the same op
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
    if (f != "send" and f != "poll") or not value:
        return None
    ok = op_type is OpType.OK
    for m in value:
        if not _fast_mop(m, f, ok):
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
        return Op(index, time, process, typ, f, value, extra)
    if not isinstance(value, list) or not value:
        raise LineProblem(f"the value of {f} must be a non-empty list of micro-ops, not {_show(value)}")
    for i, m in enumerate(value):
        _mop(m, f"value[{i}]", typ is OpType.OK, f)
    return Op(index, time, process, typ, f, value, extra)


def check_completion(invoke: Op, done: Op) -> None:
    """A completion must complete *its* invoke: same f, same micro-ops, same sends, same keys."""
    if done.f != invoke.f:
        raise LineProblem(f"completes a {invoke.f!r} invoke with f {done.f!r}")
    if done.f in KEY_FS:
        if done.value != invoke.value:
            raise LineProblem(f"{done.f} completes with keys {_show(done.value)} "
                              f"but was invoked with {_show(invoke.value)}")
        return
    a, b = invoke.value, done.value
    if len(a) != len(b):
        raise LineProblem(f"completes {len(a)} micro-ops with {len(b)}")
    for i, (m, n) in enumerate(zip(a, b, strict=True)):
        if m[0] != n[0]:
            raise LineProblem(f"value[{i}] is {n[0]!r} but the invoke had {m[0]!r}")
        if m[0] == "send" and (m[1] != n[1] or send_value(m) != send_value(n)):
            raise LineProblem(f"value[{i}] sends {n[1]}:{send_value(n)} but the invoke sent {m[1]}:{send_value(m)}")
