"""Results: checking histories (on Spark), performance facts, elle-cli, plots and reports.

A part (docs/design.md, "Layers and imports"): it reads only files a run stored (history.jsonl, test.json,
replicas/) and writes results.json and perf/ next to them; it never talks to a cluster. It imports
the ground floor (`kernel`: the history reader, the errors) and nothing else of ours.
"""
