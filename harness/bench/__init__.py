"""Benchmarks (not tests): each writes its numbers to a JSON file under bench-results/."""
