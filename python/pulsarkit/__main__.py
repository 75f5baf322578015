"""``python -m pulsarkit`` and the ``pulsarkit`` program (:func:`main`).

Two settings made before the command line's imports, worth 0.1-0.16 s of CPU per command
(bench/RESULTS.md, issue 24, "start-up"): numpy, loaded by pyarrow, starts OpenBLAS's thread pool,
whose threads spin for CPU that no command uses (none does linear algebra); and the imports create
tens of thousands of long-lived objects and no garbage, which the cyclic collector would otherwise
walk again and again: it is held off while they load and they are frozen out of its reach."""

import gc
import os
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
gc.disable()
from .cli import entry  # noqa: E402
from .cli.command import load_commands  # noqa: E402

load_commands(sys.argv[1:])  # the subcommand's module and all it imports (pyarrow...), under the same settings
gc.freeze()
gc.enable()


def main() -> int:
    return entry()


if __name__ == "__main__":
    sys.exit(main())
