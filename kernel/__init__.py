"""The ground floor: what every other package of the harness stands on, and imports nothing of ours.

- `errors`: the error tree and exit codes; `names`: identifiers and confined deletes
- `node`, `remote`: a node and how to act on it; `layout`: where things live on a node
- `rng`: the one rule that derives every random stream from the run seed
- `spec`: `RunSpec`, the typed schema of a run's settings (flags, TOML, test.json)
- `store`: the run directory layout
- `history`: the op model, its one writer and its one reader (Python and Spark)
- `db`, `workload`, `nemesis`, `checker`, `test`: the Protocols and values a test is made of
- `runtime`, `capabilities`: the seams between the backends (how time passes and activities run;
  what faults act through), so a run is one code path on containers and on the simulator

May import: the standard library and third-party libraries only — nothing of ours, and no system
under test is named here, in code or comments (tests/foundation/test_layers.py). Arrows point down
only (docs/design.md, "Layers and imports"): the parts (`workloads`, `nemesis`, `results`) import
this package alone; `harness/` (systems, provisioners, the registry, the orchestrator) imports it
and the parts.
"""
