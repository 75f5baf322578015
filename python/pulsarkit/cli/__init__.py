"""The ``pulsarkit`` command line. Each module registers its subcommands on import: a command line imports
the one of its subcommand (:func:`~.command.load_commands`), :func:`build_parser` without one all of them."""

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
