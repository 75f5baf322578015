"""The messages of a data directory into a Parquet dataset, a Delta table or an Iceberg table,
incrementally: what ``pulsarkit export`` runs, as a library::

    from pulsarkit.export import export
    summary = export("data", "parquet", "exported")        # or "delta" (deltalake), "iceberg" (pyiceberg)
    print(summary.rows, summary.to_json()["topics"])

The rows are those of ``pulsarkit messages`` (read-committed, as consumers received them), in the
flattened columns of the ``pulsarkit`` Spark data source, partitioned by ``topic`` and ``date`` (UTC
day of ``publish_time``): ``OUT/topic=persistent%3A%2F%2Ft%2Fns%2Fx/date=2024-05-01/part-<run>-<n>.parquet``,
the directory names escaped as Spark escapes them, so ``spark.read.parquet(OUT)`` (``date`` read as
a DateType) and ``pyarrow.dataset(OUT, partitioning="hive")`` read it as is (files starting with ``_``,
the marks and the lock, are skipped by both).

Incremental: every topic's high-water mark (the last position considered: ledger and entry) is kept
with the output, in ``OUT/_pulsarkit_export.json`` for Parquet (with the list of the data files it
commits), in the Delta commit's metadata, or in the summary properties of the Iceberg snapshot
(``pulsarkit.export``) that adds the run's data files. A run reads only positions after the marks
(and the earlier chunks of a message that ends after one) up to each topic's current end, or up to
the first message of a transaction still open (read-committed: those messages come out with a later
run once the transaction ends).

Every format is a :class:`Target` (``target.py``) driven through the same protocol by :func:`export`
(``run.py``): open it (an output that is not its own is refused), lock the output (``protocol.py``),
recover what an interrupted run left, read the committed marks (``marks.py``), plan from them, stage
the rows as Parquet under ``OUT/_staging/<run>/`` (``staging.py``), commit the staged files and the
new marks in one atomic step. Parquet (``parquet.py``) renames the data files into place, synced, then the
marks file: a run that dies in between leaves files the marks file does not list. Delta (``delta.py``)
commits data and marks in one transaction, Iceberg (``iceberg.py``) in one append (one snapshot).
Before its commit a run records in its journal (``OUT/_pulsarkit_journal.json``, ``paths.py``) what
the commit creates (or, for the Delta and Iceberg writers, which name their files, what was there
before); the next run, with no flag, deletes exactly what a run that did not commit left (a first run
too), and nothing else, so no message is exported twice or lost and no file of anyone else's is
touched. Nothing is written outside ``OUT`` or through a link: a symbolic link (or a device, a FIFO)
among pulsarkit's names in ``OUT`` is refused, naming it. A second run into the same ``OUT`` is
refused while the first holds the lock (naming its pid). The export is private (0700 directories,
0600 files); a run with nothing new commits nothing. A topic name too long for a directory name gets
a shortened, hashed one (Parquet, recorded in the marks file's ``topic_dirs``, the files naming their
topic in their metadata; the Delta and Iceberg writers name directories in full: they leave such a
topic out, with a warning naming it, and keep its mark). What the export cannot
get back is warned about (the log, and ``warnings`` in the summary): a mark in a ledger that retention
removed since the last run (messages after it in trimmed ledgers were never exported), a topic that is
gone.

:func:`export` stages in this process. The Spark engines (tasks writing the staged files, or Spark's
own writer) and ``--engine auto`` are :func:`pulsarkit.spark.export.export`: the same run, targets and
commit.

**Iceberg** (``to="iceberg"``): ``OUT`` is the table (``OUT/metadata/``, the data files in
``OUT/data/topic=<topic>/date=<day>/``, identity partitions on ``topic`` and ``date``, the same
columns as the other targets, ``date`` a ``YYYY-MM-DD`` string) and holds its catalog: pyiceberg's
``SqlCatalog`` on a SQLite file, ``OUT/_pulsarkit_iceberg_catalog.db``, table ``pulsarkit.messages``,
so no catalog server is needed. Read it with pyiceberg::

    from pyiceberg.catalog.sql import SqlCatalog
    catalog = SqlCatalog("pulsarkit", uri=f"sqlite:///{OUT}/_pulsarkit_iceberg_catalog.db", warehouse=OUT)
    rows = catalog.load_table("pulsarkit.messages").scan().to_arrow()

or with any Iceberg reader given the current metadata JSON (``metadata`` in the summary):
pyiceberg's ``StaticTable.from_metadata(path)``, or Spark with Iceberg's Spark runtime jar,
``spark.read.format("iceberg").load(path)`` (``path + "#snapshots"`` lists the snapshots and their
marks). The Spark read was checked by hand, not by the tests: Spark 4.1.4 with
iceberg-spark-runtime-4.1_2.13 1.11.0 read the same rows; the tests run PySpark 4.3, for which
Iceberg 1.11.0, the newest release then, has no runtime (the 4.1 one fails to load on it).
Iceberg metadata names files by absolute path: a moved ``OUT`` no longer reads through its metadata,
and further runs into it are refused.

An existing ``OUT`` that is not a pulsarkit export (a non-empty directory without the marks file, one
holding a ``_staging`` no run journal of pulsarkit's says it made, a Delta table without pulsarkit marks)
is refused without ``force`` (for Iceberg, one with a ``data/`` or ``metadata/`` folder always); ``force``
never deletes a file pulsarkit did not write; marks from another data directory are refused without
``other_source``. An unreadable entry stops the export
unless ``skip_unreadable``, so that a mark never moves past a message that was not exported.
"""

from ..lazy import exports

# What type checkers see; at runtime each name is imported on first use (lazy.py says why).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from .delta import DELTA_MARKS_KEY, DeltaTarget
    from .iceberg import ICEBERG_MARKS_KEY, ICEBERG_TABLE, IcebergTarget, iceberg_schema
    from .marks import ExportMarks, Mark, MessageId, RunRecord
    from .parquet import ParquetTarget, data_files
    from .protocol import ICEBERG_CATALOG, LOCK_FILE, MARKS_FILE, STAGING, ExportRefused
    from .run import TARGETS, Engine, ExportJob, ExportSummary, LocalEngine, ReadIssues, Reporter, TopicSummary, export
    from .staging import FILE_FIELDS, PARTITION_COLUMNS, StagingWriter, escape_path_name
    from .target import Commit, Target

# Hidden from type checkers, which would take every unknown name for a module attribute.
if not TYPE_CHECKING:
    __getattr__, __dir__ = exports(
        __name__,
        {
            ".delta": ("DELTA_MARKS_KEY", "DeltaTarget"),
            ".iceberg": ("ICEBERG_MARKS_KEY", "ICEBERG_TABLE", "IcebergTarget", "iceberg_schema"),
            ".marks": ("ExportMarks", "Mark", "MessageId", "RunRecord"),
            ".parquet": ("ParquetTarget", "data_files"),
            ".protocol": ("ICEBERG_CATALOG", "LOCK_FILE", "MARKS_FILE", "STAGING", "ExportRefused"),
            ".run": (
                "TARGETS",
                "Engine",
                "ExportJob",
                "ExportSummary",
                "LocalEngine",
                "ReadIssues",
                "Reporter",
                "TopicSummary",
                "export",
            ),
            ".staging": ("FILE_FIELDS", "PARTITION_COLUMNS", "StagingWriter", "escape_path_name"),
            ".target": ("Commit", "Target"),
        },
    )

__all__ = [
    "DELTA_MARKS_KEY",
    "FILE_FIELDS",
    "ICEBERG_CATALOG",
    "ICEBERG_MARKS_KEY",
    "ICEBERG_TABLE",
    "LOCK_FILE",
    "MARKS_FILE",
    "PARTITION_COLUMNS",
    "STAGING",
    "TARGETS",
    "Commit",
    "DeltaTarget",
    "Engine",
    "ExportJob",
    "ExportMarks",
    "ExportRefused",
    "ExportSummary",
    "IcebergTarget",
    "LocalEngine",
    "ReadIssues",
    "Mark",
    "MessageId",
    "ParquetTarget",
    "Reporter",
    "RunRecord",
    "StagingWriter",
    "Target",
    "TopicSummary",
    "data_files",
    "escape_path_name",
    "export",
    "iceberg_schema",
]
