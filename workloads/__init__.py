"""Workloads: a client that turns ops into calls on a real Kafka client, and a seeded op generator.

One file per workload plus one line in `registry.py`. A workload may import `harness.history`.
"""
