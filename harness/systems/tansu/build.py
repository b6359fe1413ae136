"""Tansu, built from crates.io with cargo, and the node image layer that carries it.

Tansu is installed by name from its registry (`cargo install tansu --version V --locked`), never
vendored. The build takes about twenty minutes on two cores, so it is done once per *machine*, not
per clone: the binary and cargo's target directory live in a machine-wide cache (`CACHE`, default
`/var/cache/chaos/tansu`, `$CHAOS_CACHE` to move it), keyed by version and features; a fresh clone
(CI's included) finds it there. The image layer `chaos-tansu:<hash>` is the harness's node image plus
that binary (`layer`, built by `harness/image/layer.py`), cached by a content hash as the node image
is. Nothing here is on the path of the default `make run`: only `--system tansu` (or `make tansu`)
asks for it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from kernel.errors import EnvironmentProblem
from kernel.system import ImageLayer

#: the release the analysis is of; `--system-version` names another (one that builds with this rustc)
DEFAULT_VERSION = "0.6.0"
#: libsql: the SQLite storage engine; postgres: the PostgreSQL one; dynostore: S3 and memory
FEATURES = ("dynostore", "libsql", "postgres")
#: the build's log, in the checkout's .build/logs/ as every install step's is
LOGS = Path(__file__).resolve().parents[3] / ".build" / "logs"


def cache_root() -> Path:
    return Path(os.environ.get("CHAOS_CACHE", "/var/cache/chaos")) / "tansu"


@dataclass(frozen=True, slots=True)
class TansuBuild:
    version: str
    features: tuple[str, ...] = FEATURES

    @property
    def key(self) -> str:
        return f"{self.version}-{'-'.join(self.features)}"

    @property
    def root(self) -> Path:
        """`cargo install --root`: the binary lands in `root/bin/tansu`."""
        return cache_root() / self.key

    @property
    def binary(self) -> Path:
        return self.root / "bin" / "tansu"

    @property
    def log(self) -> Path:
        return LOGS / f"tansu-{self.version}.log"


def ensure_binary(build: TansuBuild, *, quiet: bool = False) -> Path:
    """The tansu binary of `build`, built with cargo if this machine has none yet; or one sentence
    naming the build's log (exit 6: no cargo, a failed build, a version that does not build here)."""
    if build.binary.is_file() and os.access(build.binary, os.X_OK):
        return build.binary
    cargo = shutil.which("cargo") or str(Path.home() / ".cargo/bin/cargo")
    if not Path(cargo).is_file():
        raise EnvironmentProblem(f"cargo is not installed, and tansu {build.version} is built with it "
                                 "(install Rust's toolchain, then `make tansu`)")
    LOGS.mkdir(parents=True, exist_ok=True)
    build.root.mkdir(parents=True, exist_ok=True)
    if not quiet:
        print(f"building tansu {build.version} with cargo, once per machine (about 20 minutes on 2 cores; "
              f"log: {build.log})", file=sys.stderr, flush=True)
    cmd = [cargo, "install", "tansu", "--version", build.version, "--locked", "--features", ",".join(build.features),
           "--root", str(build.root)]
    env = {**os.environ, "CARGO_TARGET_DIR": str(cache_root() / "target")}
    t0 = time.monotonic()
    with open(build.log, "ab") as f:
        f.write(("\n$ " + " ".join(cmd) + "\n").encode())
        f.flush()
        proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, check=False)
    if proc.returncode != 0 or not build.binary.is_file():
        tail = [ln for ln in build.log.read_text(errors="replace").splitlines() if ln.strip()][-3:]
        raise EnvironmentProblem(f"building tansu {build.version} with cargo failed (exit {proc.returncode}); "
                                 f"the whole log is {build.log}: {' | '.join(tail)}"[:600])
    if not quiet:
        print(f"tansu {build.version} built in {time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)
    return build.binary


def _file_key(path: Path) -> str:
    """What names a built binary in the layer's key: its size and modification time (cargo rewrites
    it on every build), read from its metadata rather than by hashing 60 MB on every run."""
    st = path.stat()
    return f"{st.st_size}-{st.st_mtime_ns}"


def layer(build: TansuBuild) -> ImageLayer:
    """Tansu's layer over the node image: the binary (built first, if this machine has none yet) in
    /usr/local/bin, and the directory its SQLite store lives in."""
    binary = ensure_binary(build)
    return ImageLayer("tansu", f"{build.key}-{_file_key(binary)}", (("/usr/local/bin/tansu", str(binary)),),
                      "mkdir -p /var/lib/tansu && /usr/local/bin/tansu --help >/dev/null")
