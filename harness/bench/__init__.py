"""Benchmarks (not tests): each writes its numbers to a JSON file under bench-results/.

They may import anything of ours (they sit above the orchestrator); what they measured is recorded
in docs/measurements/, never asserted by a test."""
