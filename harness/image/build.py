"""Build (or find cached) the base and node images.

    python -m harness.image build [--force]

Base layer `chaos-node-base:<hash>`: debootstrap (minbase) of bookworm plus the node's Debian
packages, installed with apt inside a chroot on the host (the containers cannot reach a mirror),
apt cache removed, then `docker import`. Its hash covers the package list and this file's recipe
version. Node layer `chaos-node:<hash>` (also tagged `chaos-node:latest`): the base plus a
wheelhouse of cluster-impl built on the host, installed into a venv with `pip --no-index`, plus
`files/`. Its hash covers the base hash, cluster-impl's sources and `files/`.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors

from harness.systems.logbroker.decl import IMAGE_PACKAGES
from kernel.errors import ProvisionError

ROOT = Path(__file__).resolve().parents[2]
FILES = Path(__file__).resolve().parent / "files"
BUILD_DIR = ROOT / ".build"
CLUSTER_IMPL = ROOT / "cluster-impl"

SUITE = "bookworm"
#: what every node has (sshd, iptables, libfaketime, the FUSE disk), then what our broker's system
#: adds (its declaration says: Java and ZooKeeper); the hash covers the sorted set
PACKAGES = [
    "python3", "python3-venv", "openssh-server", "iptables", "iproute2", "procps", "tini",
    "libfaketime", "faketime", "ca-certificates", "fuse3", "python3-pyfuse3", *IMAGE_PACKAGES,
]
RECIPE_VERSION = "4"
BASE_REPO = "chaos-node-base"
NODE_REPO = "chaos-node"
NODE_TAG_LATEST = f"{NODE_REPO}:latest"
IMAGE_LABEL = "chaos.image"
HASH_LABEL = "chaos.hash"
#: Images carry the project label too (value "shared": no one cluster owns them; `down --all` keeps them).
CLUSTER_LABEL = "chaos.cluster"


@dataclass(frozen=True, slots=True)
class BuiltImage:
    tag: str
    id: str
    hash: str
    cached: bool
    seconds: float


def _sha(parts: list[bytes]) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(len(p).to_bytes(8, "big"))
        h.update(p)
    return h.hexdigest()[:16]


def _tree_bytes(root: Path, *, skip: tuple[str, ...] = ()) -> list[bytes]:
    out = []
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if not p.is_file() or any(part in skip for part in p.relative_to(root).parts):
            continue
        out.append(rel.encode())
        out.append(p.read_bytes())
        out.append(str(p.stat().st_mode & 0o777).encode())
    return out


def base_hash() -> str:
    return _sha([SUITE.encode(), " ".join(sorted(PACKAGES)).encode(), RECIPE_VERSION.encode()])


def node_hash() -> str:
    skip = ("tests", "bench", "__pycache__", "build", "dist") + tuple(
        p.name for p in CLUSTER_IMPL.glob("*.egg-info")
    )
    return _sha(
        [base_hash().encode(), *_tree_bytes(CLUSTER_IMPL, skip=skip), *_tree_bytes(FILES, skip=("__pycache__",))]
    )


def host_mirror() -> str:
    """The Debian mirror the host's apt uses (we never hard-code one)."""
    candidates: list[Path] = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]
    for path in candidates:
        if not path.is_file() or "disabled" in path.name:
            continue
        text = path.read_text()
        for line in text.splitlines():
            line = line.strip()
            if line.startswith("URIs:"):
                for uri in line.split()[1:]:
                    if uri.rstrip("/").endswith("/debian"):
                        return uri
            elif line.startswith("deb ") and "security" not in line:
                fields = [f for f in line.split() if not f.startswith("[")]
                if len(fields) >= 3 and fields[1].rstrip("/").endswith("/debian"):
                    return fields[1]
    raise ProvisionError("cannot find a Debian mirror in /etc/apt/sources.list*; the node image needs one")


def docker_client() -> docker.DockerClient:
    """A connected Docker client, or a ProvisionError that says the engine is not reachable."""
    try:
        c = docker.from_env(timeout=600)
        c.ping()
        return c
    except docker.errors.DockerException as e:
        raise ProvisionError(f"cannot talk to the Docker Engine: {e}") from None


def _find(client: docker.DockerClient, kind: str, h: str) -> docker.models.images.Image | None:
    imgs = client.images.list(filters={"label": [f"{IMAGE_LABEL}={kind}", f"{HASH_LABEL}={h}"]})
    return imgs[0] if imgs else None


def _run(cmd: list[str], log: Path) -> None:
    with open(log, "ab") as f:
        f.write(("\n$ " + " ".join(cmd) + "\n").encode())
        f.flush()
        proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, check=False)
    if proc.returncode != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-5:]
        raise ProvisionError(f"image build step `{' '.join(cmd[:3])}…` failed ({proc.returncode}): {' | '.join(tail)}")


def build_base(client: docker.DockerClient, *, force: bool = False) -> BuiltImage:
    h = base_hash()
    t0 = time.monotonic()
    found = _find(client, "base", h)
    if found is not None and not force:
        return BuiltImage(f"{BASE_REPO}:{h}", found.id, h, True, 0.0)
    if shutil.which("debootstrap") is None:
        raise ProvisionError("debootstrap is not installed; run `make deps` (apt-get install debootstrap)")
    BUILD_DIR.mkdir(exist_ok=True)
    rootfs = BUILD_DIR / f"rootfs-{h}"
    log = BUILD_DIR / f"base-{h}.log"
    log.write_text("")
    if rootfs.exists():
        _umount_all(rootfs)
        shutil.rmtree(rootfs)
    mirror = host_mirror()
    print(f"building base image {BASE_REPO}:{h} (debootstrap + apt; log: {log}) ...", file=sys.stderr)
    _run(["debootstrap", "--variant=minbase", "--include=python3,ca-certificates", SUITE, str(rootfs), mirror], log)
    try:
        for m in ("proc", "sys", "dev"):
            _run(["mount", "--bind", f"/{m}", str(rootfs / m)], log)
        (rootfs / "usr/sbin/policy-rc.d").write_text("#!/bin/sh\nexit 101\n")
        (rootfs / "usr/sbin/policy-rc.d").chmod(0o755)
        env = "DEBIAN_FRONTEND=noninteractive"
        _run(["chroot", str(rootfs), "sh", "-c", f"{env} apt-get update -qq"], log)
        _run(
            ["chroot", str(rootfs), "sh", "-c",
             f"{env} apt-get install -y -qq --no-install-recommends {' '.join(PACKAGES)}"],
            log,
        )
        _run(["chroot", str(rootfs), "sh", "-c",
              "apt-get clean && rm -rf /var/lib/apt/lists/* /etc/ssh/ssh_host_*"], log)
        (rootfs / "usr/sbin/policy-rc.d").unlink()
    finally:
        _umount_all(rootfs)
    tar_path = BUILD_DIR / f"rootfs-{h}.tar"
    _run(["tar", "-C", str(rootfs), "--numeric-owner", "-cf", str(tar_path), "."], log)
    with open(tar_path, "rb") as f:
        changes = [f"LABEL {IMAGE_LABEL}=base", f"LABEL {HASH_LABEL}={h}", f"LABEL {CLUSTER_LABEL}=shared"]
        proc = subprocess.run(
            ["docker", "import", *sum((["--change", c] for c in changes), []), "-", f"{BASE_REPO}:{h}"],
            stdin=f, capture_output=True, check=False,
        )
    if proc.returncode != 0:
        raise ProvisionError(f"docker import failed: {proc.stderr.decode().strip()}")
    tar_path.unlink()
    shutil.rmtree(rootfs)
    img = client.images.get(f"{BASE_REPO}:{h}")
    return BuiltImage(f"{BASE_REPO}:{h}", img.id, h, False, time.monotonic() - t0)


def _umount_all(rootfs: Path) -> None:
    for m in ("dev", "sys", "proc"):
        subprocess.run(["umount", "-l", str(rootfs / m)], capture_output=True, check=False)


def build_wheelhouse(dest: Path) -> None:
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-cache-dir", str(CLUSTER_IMPL), "-w", str(dest)],
        capture_output=True, text=True, check=False,
    )
    if proc.returncode != 0:
        raise ProvisionError(f"building the cluster-impl wheelhouse failed: {proc.stderr.strip().splitlines()[-1:]}")


def build_node(client: docker.DockerClient, *, force: bool = False) -> BuiltImage:
    base = build_base(client, force=False)
    h = node_hash()
    t0 = time.monotonic()
    found = _find(client, "node", h)
    if found is not None and not force:
        found.tag(NODE_REPO, "latest")
        return BuiltImage(f"{NODE_REPO}:{h}", found.id, h, True, 0.0)
    print(f"building node image {NODE_REPO}:{h} ...", file=sys.stderr)
    ctx = BUILD_DIR / f"node-ctx-{h}"
    if ctx.exists():
        shutil.rmtree(ctx)
    ctx.mkdir(parents=True)
    build_wheelhouse(ctx / "wheelhouse")
    shutil.copytree(FILES, ctx / "files", ignore=shutil.ignore_patterns("__pycache__"))
    (ctx / "Dockerfile").write_text(
        f"FROM {base.tag}\n"
        "COPY wheelhouse /tmp/wheelhouse\n"
        "COPY files/ /\n"
        "RUN python3 -m venv /opt/logbroker \\\n"
        " && /opt/logbroker/bin/pip install -q --no-index --find-links /tmp/wheelhouse logbroker \\\n"
        " && rm -rf /tmp/wheelhouse /root/.cache \\\n"
        " && mkdir -p /etc/chaos /var/log/chaos /run/chaos /var/lib/logbroker \\\n"
        " && echo +0 > /etc/chaos/faketime\n"
        f"LABEL {IMAGE_LABEL}=node {HASH_LABEL}={h} {CLUSTER_LABEL}=shared\n"
        'ENTRYPOINT ["/usr/bin/tini", "--"]\n'
        'CMD ["/opt/chaos/bin/node-init"]\n'
    )
    try:
        img, _ = client.images.build(path=str(ctx), tag=f"{NODE_REPO}:{h}", pull=False, rm=True, forcerm=True)
    except docker.errors.BuildError as e:
        lines = [str(x.get("stream", x.get("error", ""))).strip() for x in e.build_log]
        raise ProvisionError(f"node image build failed: {' | '.join([ln for ln in lines if ln][-4:])}") from None
    img.tag(NODE_REPO, "latest")
    shutil.rmtree(ctx)
    return BuiltImage(f"{NODE_REPO}:{h}", img.id, h, False, time.monotonic() - t0)


def ensure_node_image(*, force: bool = False) -> BuiltImage:
    """The node image for the current sources, building whatever layer is missing or stale."""
    return build_node(docker_client(), force=force)
