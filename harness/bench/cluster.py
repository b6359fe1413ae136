"""`make bench-cluster`: node image build time (cold and cached), `cluster up` to all nodes answering
SSH, and `cluster down`, for a 5-node docker cluster. Cold means the node layer is rebuilt
(`--force`); `--cold-base` also rebuilds the debootstrap base (minutes; off by default).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from harness.image.build import build_base, build_node
from harness.image.build import docker_client as _client
from harness.provision.docker import DockerProvisioner
from harness.ssh import SSHRemote


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, default=Path("bench-results/cluster.json"))
    ap.add_argument("--nodes", type=int, default=5)
    ap.add_argument("--cold-base", action="store_true")
    args = ap.parse_args()
    client = _client()
    res: dict[str, float] = {}
    if args.cold_base:
        res["base_build_cold_s"] = build_base(client, force=True).seconds
    t = time.perf_counter()
    build_node(client, force=True)
    res["node_layer_build_cold_s"] = time.perf_counter() - t
    t = time.perf_counter()
    img = build_node(client)
    res["image_build_cached_s"] = time.perf_counter() - t
    if not img.cached:
        raise SystemExit("the second build was not a cache hit: did cluster-impl/ change during the benchmark?")
    prov = DockerProvisioner("bench", build_image=False, image=img.tag)
    try:
        t = time.perf_counter()
        nodes = prov.up(args.nodes)
        for n in nodes:  # "answering SSH" means a command ran, not just a port open
            with SSHRemote(n) as r:
                r.exec("true")
        res[f"up_{args.nodes}_nodes_to_ssh_s"] = time.perf_counter() - t
    finally:
        t = time.perf_counter()
        prov.down()
        res["down_s"] = time.perf_counter() - t
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({k: round(v, 2) for k, v in res.items()}, indent=2))
    for k, v in res.items():
        print(f"{k:28s} {v:8.2f}")
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
