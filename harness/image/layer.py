"""A system's layer over the node image (`kernel.system.ImageLayer`), built once per machine and key.

The node image holds what every node needs and our broker; a system built elsewhere (Tansu, with
cargo) adds its files in a layer of its own, `chaos-<name>:<hash>`, found again by a content-hash
label exactly as the node image is, so a second run (or a fresh clone on the same machine) builds
nothing.
"""

from __future__ import annotations

import hashlib
import shutil
import sys

import docker.errors

from harness.image.build import BUILD_DIR, CLUSTER_LABEL, HASH_LABEL, IMAGE_LABEL, docker_client, ensure_node_image
from kernel.errors import ProvisionError
from kernel.system import ImageLayer


def ensure_layer(layer: ImageLayer) -> str:
    """The tag of the node image plus `layer`, built if missing or stale."""
    node = ensure_node_image()
    h = hashlib.sha256(f"{node.hash}\n{layer.name}\n{layer.key}\n{layer.files}\n{layer.run}".encode()).hexdigest()[:16]
    tag = f"chaos-{layer.name}:{h}"
    client = docker_client()
    if client.images.list(filters={"label": [f"{IMAGE_LABEL}={layer.name}", f"{HASH_LABEL}={h}"]}):
        return tag
    print(f"building image {tag} (the node image plus {layer.name} {layer.key}) ...", file=sys.stderr, flush=True)
    ctx = BUILD_DIR / f"{layer.name}-ctx-{h}"
    if ctx.exists():
        shutil.rmtree(ctx)
    ctx.mkdir(parents=True)
    copies = []
    for i, (dest, src) in enumerate(layer.files):
        shutil.copy2(src, ctx / f"f{i}")
        copies.append(f"COPY f{i} {dest}\n")
    (ctx / "Dockerfile").write_text(
        f"FROM {node.tag}\n" + "".join(copies) + f"RUN {layer.run}\n"
        f"LABEL {IMAGE_LABEL}={layer.name} {HASH_LABEL}={h} {CLUSTER_LABEL}=shared\n")
    try:
        client.images.build(path=str(ctx), tag=tag, pull=False, rm=True, forcerm=True)
    except docker.errors.BuildError as e:
        lines = [str(x.get("stream", x.get("error", ""))).strip() for x in e.build_log]
        raise ProvisionError(f"the {layer.name} image build failed: {' | '.join([ln for ln in lines if ln][-4:])}"
                             ) from None
    finally:
        shutil.rmtree(ctx, ignore_errors=True)
    return tag
