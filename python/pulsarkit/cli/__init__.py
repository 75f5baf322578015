"""The ``pulsarkit`` command line. Each module registers its subcommands on import."""

from . import compaction, datadir, entrylog, export, gc, replicas, report, sql  # noqa: F401  (registration)
from .command import EXIT_DATA_PROBLEMS, EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, build_parser, entry, main

__all__ = [
    "EXIT_DATA_PROBLEMS",
    "EXIT_ERROR",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "build_parser",
    "entry",
    "main",
]
