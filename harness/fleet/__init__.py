"""The simulation fleet: `chaos sim-search --spark-master URL` runs its seeds as Spark tasks.

- `tasks.py`: what an executor does with one seed (simulate, screen, keep the run under a key);
- `search.py`: the driver's loop (waves of seeds as Spark jobs, dedupe by seed, batch checks);
- `shrink.py`: a found seed's candidate schedules fanned out as tasks, with the sequential
  shrinker's result;
- `progress.py`: seeds done, seeds/hour, failures and time left on the terminal.

The one-host path (`--jobs N`, `harness/sim_search.py`) is not changed by any of it: both call the
same `simulate_and_screen`, so the same seed gets the same verdict on either.
"""
