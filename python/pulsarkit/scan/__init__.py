"""The one message reader, with no Spark: a data directory opened read-only (:func:`open_data_dir`),
its topics planned into partitions of ledger segments (:func:`plan`), each partition's entries read
and verified and turned into rows of the one message schema (:func:`read_partition`,
:data:`MESSAGE_FIELDS`). ``pulsarkit messages``, ``backlog``, the analysis, the Spark sources and the
export all read messages through it."""

from ..lazy import exports

# Eager: the function ``plan`` shares its name with its module, which a later import of ``scan.plan`` would
# otherwise leave in its place.
from .plan import ScanPlan, plan, plan_data_dir

# What type checkers see; at runtime each name is imported on first use (lazy.py says why).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from .datadir import DataDir, DataDirSpec, open_data_dir
    from .partition import PRUNED, ReadStats, Replica, ScanPartition, Segment
    from .read import BATCH_BYTES, UnreadableEntry, iter_entries, read_all, read_partition
    from .records import DataDirError
    from .schema import ENTRY_FIELDS, MESSAGE_FIELDS, PUSHABLE, TIME_COLUMNS, Filter, arrow_schema, message_fields
    from .transactions import TXN_MODES

# Hidden from type checkers, which would take every unknown name for a module attribute.
if not TYPE_CHECKING:
    __getattr__, __dir__ = exports(
        __name__,
        {
            ".datadir": ("DataDir", "DataDirSpec", "open_data_dir"),
            ".partition": ("PRUNED", "ReadStats", "Replica", "ScanPartition", "Segment"),
            ".read": ("BATCH_BYTES", "UnreadableEntry", "iter_entries", "read_all", "read_partition"),
            ".records": ("DataDirError",),
            ".schema": (
                "ENTRY_FIELDS",
                "MESSAGE_FIELDS",
                "PUSHABLE",
                "TIME_COLUMNS",
                "Filter",
                "arrow_schema",
                "message_fields",
            ),
            ".transactions": ("TXN_MODES",),
        },
    )

__all__ = [
    "BATCH_BYTES",
    "DataDir",
    "DataDirError",
    "DataDirSpec",
    "ENTRY_FIELDS",
    "Filter",
    "MESSAGE_FIELDS",
    "PRUNED",
    "PUSHABLE",
    "ReadStats",
    "Replica",
    "ScanPartition",
    "ScanPlan",
    "Segment",
    "TIME_COLUMNS",
    "TXN_MODES",
    "UnreadableEntry",
    "arrow_schema",
    "iter_entries",
    "message_fields",
    "open_data_dir",
    "plan",
    "plan_data_dir",
    "read_all",
    "read_partition",
]
