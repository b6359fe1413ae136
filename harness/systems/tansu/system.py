"""`TansuSystem`: Tansu, a Kafka-protocol broker nobody here wrote, as a system under test.

Everything about deploying and faulting it is a process-system file (`sqlite.toml` beside this
module), read by the same code as a user's `--system process:FILE.toml`; what this class adds is the
one thing a user's file cannot say: build Tansu from crates.io with cargo (`build.py`) into a layer
of the node image, once per machine, for the version the run names (`--system-version`).
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

from harness.systems.process.config import load
from harness.systems.process.system import ProcessSystem
from harness.systems.tansu.build import DEFAULT_VERSION, TansuBuild, layer
from kernel.spec import RunSpec
from kernel.system import ImageLayer

FILE = Path(__file__).resolve().parent / "sqlite.toml"


class TansuSystem(ProcessSystem):
    def __init__(self, version: str = "") -> None:
        super().__init__(load(FILE))
        self.version = version or DEFAULT_VERSION
        self.name = "tansu"

    @property
    def image(self) -> str | None:
        """No image of the user's: the harness builds Tansu's layer over its own (`image_layer`)."""
        return None

    @cached_property
    def image_layer(self) -> ImageLayer:
        """This version's tansu over the node image (built with cargo the first time on a machine)."""
        return layer(TansuBuild(self.version))

    def deploy_line(self, spec: RunSpec) -> str:
        return f"starting tansu {self.version} (one broker, its SQLite store on the first node's FUSE disk)"
