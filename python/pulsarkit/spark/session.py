"""A local Spark session that works without ceremony.

Spark in local mode needs three things people otherwise set by hand: the Python its workers run
(this interpreter, the one pulsarkit is installed in), a driver bound to the loopback address (no
LAN exposure, no failing hostname lookups on laptops and containers), and enough driver memory for
Arrow batches. :func:`local_session` sets each only where the caller has not (an environment
variable already set, or a ``conf`` key given, wins), and registers pulsarkit's data sources
(``pulsarkit``, ``pulsarkit-entries``, ``pulsarkit-entrylog``; with filter pushdown on). On a
cluster, build the session as the cluster wants and call :func:`pulsarkit.spark.register`.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from .messages_source import register

#: Defaults for a local session; the caller's ``conf`` wins.
LOCAL_DEFAULTS = {
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.driver.memory": "1g",
    "spark.sql.shuffle.partitions": "2",
}


def local_session(cores: int | str = 2, app_name: str = "pulsarkit", conf: dict[str, str] | None = None) -> Any:
    """A ``local[cores]`` SparkSession with the pulsarkit data sources registered."""
    from pyspark.sql import SparkSession

    for var in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON"):
        os.environ.setdefault(var, sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.master(f"local[{cores}]").appName(app_name)
    for k, v in {**LOCAL_DEFAULTS, **(conf or {})}.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


__all__ = ["LOCAL_DEFAULTS", "local_session"]
