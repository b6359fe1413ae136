"""Results: checking histories (on Spark), performance facts, elle-cli, and (later) plots and reports.

Reads only files a run stored (history.jsonl, test.json, replicas/) and writes results.json and
perf/ next to them; it never talks to a cluster. It may import `harness.history` and
`harness.errors` (the formats and the exit codes), nothing else from the harness.
"""
