"""What a request handler returns, and the rule for topic names: values shared by `broker.py` and the
request modules it delegates to (`topic_admin.py`), so those need not import the core back."""

from __future__ import annotations

import re
from dataclasses import dataclass

from logbroker.core.purgatory import Body, Deferred

TOPIC_RE = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


@dataclass(frozen=True, slots=True)
class Reply:
    version: int
    body: Body | None = None  # None with deferred=None: no response at all (acks=0)
    deferred: Deferred | None = None
