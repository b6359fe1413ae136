"""Workloads: each a `kernel.workload.Workload` value — a client over a real Kafka client, a seeded
generator per worker, and a final generator (the drain).

A part (docs/design.md, "Layers and imports"): imports the ground floor (`kernel`) only. One file
per workload plus one line in `registry.py` (docs/extending.md, "Adding a workload").
"""
