"""One SparkSession per process, configured for small local jobs by default.

Starting a session costs seconds, so it is created once and reused (tests share it through a
session fixture). `--spark-master URL` points the same code at a real cluster.
"""

from __future__ import annotations

import os
import threading
from typing import Any

_lock = threading.Lock()
_session: Any = None
_master: str | None = None


def get_spark(master: str | None = None) -> Any:
    """The process's SparkSession (created on first use); `master` defaults to local[*]."""
    global _session, _master
    want = master or os.environ.get("CHAOS_SPARK_MASTER") or "local[*]"
    with _lock:
        if _session is not None and _master == want:
            return _session
        if _session is not None:
            _session.stop()
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.environ.setdefault("PYSPARK_PYTHON", os.environ.get("PYSPARK_PYTHON", "python3"))
        from pyspark import SparkContext
        from pyspark.sql import SparkSession

        from results.jvm import DriverJvm, driver_jvm, finish_dump_at_exit

        # options reach the JVM only when this process starts it (a restarted session reuses it)
        jvm = driver_jvm() if SparkContext._gateway is None else DriverJvm(())
        builder = (
            SparkSession.builder.appName("chaos-check")
            .master(want)
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config(
                "spark.sql.shuffle.partitions",
                os.environ.get("CHAOS_SPARK_PARTITIONS", "2" if want.startswith("local") else "64"),
            )
            .config("spark.sql.adaptive.enabled", "false" if want.startswith("local") else "true")
            .config("spark.driver.memory", os.environ.get("CHAOS_SPARK_DRIVER_MEMORY", "2g"))
            .config("spark.sql.ansi.enabled", "false")
            # perf/latency.parquet is one row per op: move it to pandas as Arrow batches, not pickled rows
            .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        )
        if jvm.options:
            builder = builder.config("spark.driver.extraJavaOptions", jvm.java_options)
        _session = builder.getOrCreate()
        finish_dump_at_exit(jvm, _session)
        _session.sparkContext.setLogLevel("ERROR")
        _master = want
        return _session
