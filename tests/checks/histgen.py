"""Histories of a correct log, generated from a seed: the model the property tests perturb.

Keys are independent logs. Producers send unique values: `ok` sends are appended and acknowledged
with their offset; `info` sends are appended or not (we do not know, and neither does the checker).
Consumers assign a key and poll forward from where they are, reading a prefix of what is committed
so far (a re-assign of the same key keeps the position, as Kafka's assign does; a new key starts
anywhere); a final drain reads every key from offset 0.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any


class HistoryBuilder:
    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []

    def op(self, process: int, type_: str, f: str, value: Any, **extra: Any) -> None:
        i = len(self.lines)
        self.lines.append(
            {
                "index": i,
                "time": (i + 1) * 1_000_000,
                "process": process,
                "type": type_,
                "f": f,
                "value": value,
                **extra,
            }
        )

    def write(self, path: Path) -> Path:
        path.write_text("".join(json.dumps(d, separators=(",", ":")) + "\n" for d in self.lines))
        return path


def correct_history(seed: int, *, keys: int = 3, steps: int = 60) -> HistoryBuilder:
    rng = random.Random(seed)
    logs: dict[int, list[int]] = {k: [] for k in range(keys)}
    next_value = 1
    positions: dict[int, int] = {}  # consumer process -> position in its key
    consumer_key: dict[int, int] = {}
    h = HistoryBuilder()
    for _ in range(steps):
        if rng.random() < 0.6:
            k, p = rng.randrange(keys), rng.randrange(3)
            v, next_value = next_value, next_value + 1
            h.op(p, "invoke", "send", [["send", k, v]])
            if rng.random() < 0.85:
                logs[k].append(v)
                h.op(p, "ok", "send", [["send", k, [len(logs[k]) - 1, v]]])
            else:
                if rng.random() < 0.5:
                    logs[k].append(v)  # an info send that did commit
                h.op(p, "info", "send", [["send", k, v]])
        else:
            p = 10 + rng.randrange(2)
            if p not in consumer_key or rng.random() < 0.1:
                k = rng.randrange(keys)
                if consumer_key.get(p) != k:  # Kafka's assign keeps a retained key's position
                    positions[p] = rng.randrange(len(logs[k]) + 1)
                consumer_key[p] = k
                h.op(p, "invoke", "assign", [consumer_key[p]])
                h.op(p, "ok", "assign", [consumer_key[p]])
            k, pos = consumer_key[p], positions[p]
            n = rng.randrange(0, 4)
            got = [[o, logs[k][o]] for o in range(pos, min(pos + n, len(logs[k])))]
            positions[p] = pos + len(got)
            h.op(p, "invoke", "poll", [["poll"]])
            h.op(p, "ok", "poll", [["poll", {str(k): got} if got else {}]])
    h.op(99, "invoke", "assign", list(range(keys)), final=True)
    h.op(99, "ok", "assign", list(range(keys)), final=True)
    h.op(99, "invoke", "poll", [["poll"]], final=True)
    h.op(
        99,
        "ok",
        "poll",
        [["poll", {str(k): [[o, v] for o, v in enumerate(log)] for k, log in logs.items() if log}]],
        final=True,
    )
    return h


def acked_values(h: HistoryBuilder) -> list[tuple[int, int, int]]:
    """(key, offset, value) of every ok send."""
    return [(m[1], m[2][0], m[2][1]) for d in h.lines if d["f"] == "send" and d["type"] == "ok" for m in d["value"]]
