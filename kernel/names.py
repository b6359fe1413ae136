"""Names that become paths or Docker objects, checked once, and deletes confined to their root.

A cluster name becomes `CHAOS_HOME/clusters/<name>/` and the Docker names `<name>-n1`, `<name>-net`;
a test name becomes `store/<name>/`. Unchecked, `--name ../..` once deleted a user's home. So a
name is an identifier (what Docker accepts for a container name, without dots that could climb
out of a directory), checked before anything touches the disk or Docker, and every removal the
harness makes goes through `remove_inside`, which resolves the path and refuses anything that is
not strictly inside the root it belongs to.
"""

from __future__ import annotations

import contextlib
import re
import shutil
from collections.abc import Iterable
from pathlib import Path

from kernel.errors import UsageError

#: Docker's container-name rule ([a-zA-Z0-9][a-zA-Z0-9_.-]*) without '.', capped so that derived
#: names (`<name>-n12`, `<name>-net`) stay short
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,47}$")
#: Kafka's legal topic characters; '.' is allowed by Kafka but '.' and '..' alone are not
TOPIC_RE = re.compile(r"^[A-Za-z0-9._-]{1,200}$")


def check_name(value: object, what: str = "name") -> str:
    """`value` if it is a usable identifier, else a UsageError saying what a name may contain."""
    if not isinstance(value, str) or not NAME_RE.match(value):
        raise UsageError(
            f"{what} {value!r} is not allowed: use 1-48 letters, digits, '-' or '_', starting with a "
            "letter or digit (it becomes a directory and Docker object names)"
        )
    return value


def check_topic(value: object) -> str:
    if not isinstance(value, str) or not TOPIC_RE.match(value) or value in (".", ".."):
        raise UsageError(f"topic {value!r} is not allowed: use 1-200 letters, digits, '.', '-' or '_'")
    return value


def is_inside(path: Path, root: Path) -> bool:
    """True if `path` (resolved, links followed) lies strictly below `root` (resolved)."""
    p, r = path.resolve(), root.resolve()
    return p != r and r in p.parents


def remove_inside(path: Path, root: Path, *, only: Iterable[str] | None = None) -> None:
    """Remove `path`, which must lie strictly inside `root`; refuse (UsageError) otherwise.

    With `only`, remove just those file names inside `path` and then `path` itself if that left it
    empty: the harness deletes what it made and nothing a user put beside it.
    """
    if path.is_symlink():
        raise UsageError(f"refusing to remove {path}: it is a symbolic link, not something the harness made")
    if not is_inside(path, root):
        raise UsageError(f"refusing to remove {path}: it is not inside {root}")
    if not path.exists():
        return
    if only is None:
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()
        return
    for name in only:
        f = path / name
        if f.is_file() and not f.is_symlink():
            f.unlink()
    with contextlib.suppress(OSError):  # something else lives there; leave it
        path.rmdir()
