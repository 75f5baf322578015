"""Spark wrappers for the pulsarkit bulk kernels: one native call per Arrow batch, never per row.

DataFrame transforms (``mapInArrow``), each taking a DataFrame with a binary entry column::

    from pulsarkit import spark as pks
    meta = pks.decode_metadata(df, "entry", verify_checksum=True)   # df + metadata columns + error
    msgs = pks.explode_messages(df, "entry", keep=["ledger_id", "entry_id"])  # one row per message
    pks.strip_broker_entry_metadata(df); pks.verify_checksums(df); pks.peek_broker_entry_metadata(df)

A local session with the data sources registered, PYSPARK_PYTHON and a loopback driver set for you::

    spark = pks.local_session()          # local[2]
    pks.read_messages(spark, "data/bookie/current").groupBy("producer_name").count().show()

Messages of whole data directories, topic-aware, as consumers received them (what ``pulsarkit
messages`` prints, flattened; with ``pushdown`` filters on topic, ledger_id and publish_time are
handled by the source, see :mod:`pulsarkit.spark.messages_source` for why it is opt-in)::

    spark.read.format("pulsarkit").option("pushdown", "true").load("/pulsar/data").where("topic LIKE 'persistent://t/%'")
    spark.read.format("pulsarkit-entries").load("/pulsar/data")      # raw entries per managed ledger

Column UDFs (``arrow_udf`` on Spark >= 4.1, ``pandas_udf`` otherwise) live in :mod:`pulsarkit.spark.udfs`::

    from pulsarkit.spark import udfs
    df.select(udfs.broker_timestamp("entry"), udfs.publish_time("entry"), udfs.strip_bem("entry"))

Storage planning over many bookies, the entry logs read by Spark tasks, each result exactly the
single-process one (:mod:`pulsarkit.spark.storage`); and the clock-skew report (:mod:`pulsarkit.spark.audit`)::

    pks.disk_usage(spark, "/pulsar/data"); pks.orphans(spark, metadata_dir=md, bookies={"bk1:3181": [d1], ...})
    pks.cleanup_plan(spark, "/pulsar/data"); pks.gc_plans(spark, metadata_dir=md, ledger_dirs=[d1, d2, d3])
    with pks.storage.open_data_dir(spark, "/pulsar/data") as dd: pks.disk_usage(spark, dd); pks.orphans(spark, dd)
    topic = spark.read.format("pulsarkit-entries").load("/pulsar/data").where("topic = 'persistent://t/ns/x'")
    pks.clock_skew_report(topic.select("ledger_id", "entry_id", "payload"), entry_col="payload")  # a dict

No row is ever dropped: undecodable entries give nulls plus an ``error`` message with the byte
offset. PySpark is imported only when a wrapper is called, so this package imports without it.
"""

from ..lazy import exports

# What type checkers see; at runtime each name is imported on first use (lazy.py says why; here: the export
# command takes its engines from spark.export, which must not load the storage planners and the bookie GC).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from . import udfs
    from .audit import clock_skew_report
    from .datasource import FORMAT_NAME, read_entries, read_messages
    from .messages_source import ENTRIES_FORMAT_NAME, read_data_dirs, register
    from .messages_source import FORMAT_NAME as MESSAGES_FORMAT_NAME
    from .session import local_session
    from .storage import cleanup_plan, disk_usage, gc_plans, orphans
    from .transactions import transactions_dataframe
    from .transforms import (
        BatchKernel,
        decode_metadata,
        explode_messages,
        explode_pending_ack_log,
        explode_transaction_log,
        peek_broker_entry_metadata,
        strip_broker_entry_metadata,
        verify_checksums,
    )

# Hidden from type checkers, which would take every unknown name for a module attribute.
if not TYPE_CHECKING:
    __getattr__, __dir__ = exports(
        __name__,
        {
            ".audit": ("clock_skew_report",),
            ".datasource": ("FORMAT_NAME", "read_entries", "read_messages"),
            ".messages_source": (
                "ENTRIES_FORMAT_NAME",
                "read_data_dirs",
                "register",
                "FORMAT_NAME as MESSAGES_FORMAT_NAME",
            ),
            ".session": ("local_session",),
            ".storage": ("cleanup_plan", "disk_usage", "gc_plans", "orphans"),
            ".transactions": ("transactions_dataframe",),
            ".transforms": (
                "BatchKernel",
                "decode_metadata",
                "explode_messages",
                "explode_pending_ack_log",
                "explode_transaction_log",
                "peek_broker_entry_metadata",
                "strip_broker_entry_metadata",
                "verify_checksums",
            ),
        },
    )

__all__ = [
    "ENTRIES_FORMAT_NAME",
    "FORMAT_NAME",
    "MESSAGES_FORMAT_NAME",
    "BatchKernel",
    "cleanup_plan",
    "clock_skew_report",
    "decode_metadata",
    "disk_usage",
    "explode_messages",
    "explode_pending_ack_log",
    "explode_transaction_log",
    "gc_plans",
    "local_session",
    "orphans",
    "transactions_dataframe",
    "peek_broker_entry_metadata",
    "read_data_dirs",
    "read_entries",
    "read_messages",
    "register",
    "strip_broker_entry_metadata",
    "udfs",
    "verify_checksums",
]
