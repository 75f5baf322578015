"""The ``pulsarkit`` command line: the subcommand registry, ``main`` and shared options.

Subcommands register themselves with :func:`command`; each adds its arguments to an argparse
subparser and returns the function that runs it::

    @command("mytool", help="...")
    def _mytool(p: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
        p.add_argument(...)
        return run

Exit codes: 0 success, 1 an error (missing file, unreadable input), 2 bad usage, 3 when the data has problems
(scan issues, digest mismatches): with ``--strict``, and always from the checkers (``fsck``, ``readjournal``),
130 interrupted (Ctrl-C: one line, and every process the command started is stopped).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TextIO

from .._native import __version__
from ..durable import fsync_dir, fsync_file, input_holding
from ..errors import PulsarkitError

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_DATA_PROBLEMS = 3
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command stopped by Ctrl-C
EXIT_CODES_HELP = """exit codes:
  0 success
  1 an error: missing, unreadable or wrong input, a refused output path (one line on stderr)
  2 bad usage (unknown option, missing argument)
  3 the data has problems (scan issues, digest mismatches, unreadable parts): with --strict, and always
    from the checkers (fsck: an error found; readjournal: a damaged record)
  130 interrupted (Ctrl-C): one line on stderr; the processes it started (Spark's JVM) are stopped

Outputs (--parquet, -o) are never written over an existing file without --overwrite, never through a
symbolic link and never inside an input; they are written under a temporary name and renamed."""

Runner = Callable[[argparse.Namespace], int]
_COMMANDS: list[tuple[str, str, Callable[[argparse.ArgumentParser], Runner]]] = []

#: The modules of this package that register subcommands, in the order :func:`load_commands` loads them all.
COMMAND_MODULES = ("compaction", "datadir", "entrylog", "export", "gc", "replicas", "report", "sql")
#: Each subcommand's module: a command line imports that one alone (the others' imports are 0.05 s of
#: a command's start, bench/RESULTS.md, issue 24). tests/cli/test_cli_lazy_commands.py keeps it true.
COMMAND_MODULE = {
    "compacted": "compaction",
    "last-message-id": "compaction",
    "ledgers": "datadir",
    "schemas": "datadir",
    "topics": "datadir",
    "messages": "datadir",
    "backlog": "datadir",
    "transactions": "datadir",
    "readjournal": "datadir",
    "readlog": "entrylog",
    "readlogmetadata": "entrylog",
    "export": "export",
    "export-marks": "export",
    "orphans": "gc",
    "du": "gc",
    "fsck": "gc",
    "orphans-cleanup": "gc",
    "gc": "gc",
    "replicas": "replicas",
    "whatif": "report",
    "report": "report",
    "sql": "sql",
}


def load_commands(argv: Sequence[str] | None = None) -> None:
    """Imports the modules that register subcommands: the one of ``argv``'s subcommand when its first
    word names one, else all of them (``--help``, a mistyped command, a parser for its own sake)."""
    first = argv[0] if argv else None
    names = (COMMAND_MODULE[first],) if first in COMMAND_MODULE else COMMAND_MODULES
    for name in names:
        importlib.import_module(f"{__package__}.{name}")


def command(name: str, help: str) -> Callable[[Callable[[argparse.ArgumentParser], Runner]], Any]:
    """Registers a subcommand: the decorated function configures its parser and returns the runner."""

    def deco(fn: Callable[[argparse.ArgumentParser], Runner]) -> Callable[[argparse.ArgumentParser], Runner]:
        _COMMANDS.append((name, help, fn))
        return fn

    return deco


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser of every subcommand, or, given the command line, of its subcommand (:func:`load_commands`)."""
    load_commands(argv)
    p = argparse.ArgumentParser(
        prog="pulsarkit",
        description="Apache Pulsar and BookKeeper storage formats: inspect, verify and convert.",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"pulsarkit {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for name, help_text, configure in _COMMANDS:
        sp = sub.add_parser(
            name,
            help=help_text,
            description=help_text,
            epilog=EXIT_CODES_HELP,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        sp.set_defaults(_run=configure(sp))
    return p


class _NoPandas:
    """An import hook that says pandas is not installed. pyarrow probes for pandas the first time it is
    given Python values (``pa.array``, ``pa.scalar``, a compute call) and imports it whole: 0.25-0.3 s
    of a command's ~1 s (bench/RESULTS.md, issue 24). A command that never hands data to pandas runs
    with pyarrow believing it absent. The read paths make no such probe (``codec.columns``: library callers
    pay nothing either); this hook keeps any other command's from costing the import."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"pulsarkit {name}: not loaded by this command", name=name)
        return None


def _needs_pandas(args: argparse.Namespace) -> bool:
    """Whether the command may hand data to pandas: only an export through Spark (its driver) or another
    table library may; every other command reads and writes Arrow alone."""
    return args.command == "export" and (getattr(args, "engine", "local") != "local" or args.to[0] != "parquet")


def entry() -> int:
    """The ``pulsarkit`` program: :func:`main` in a process of its own (the import hook stays with it)."""
    return main(sys.argv[1:], own_process=True)


def main(argv: list[str] | None = None, own_process: bool = False) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    run = getattr(args, "_run", None)
    if run is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    if own_process and "pandas" not in sys.modules and not _needs_pandas(args):
        sys.meta_path.insert(0, _NoPandas())
    # Library warnings (a skipped FIFO, ...) reach the user as one line each, like the errors.
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_VisibleFormatter(f"pulsarkit {args.command}: warning: %(message)s"))
    log = logging.getLogger("pulsarkit")
    log.addHandler(handler)
    log.propagate = False
    stdout = sys.stdout
    if _is_terminal(stdout):
        sys.stdout = TerminalText(stdout)
    try:
        return int(run(args) or 0)
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, without a traceback at interpreter exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except (OSError, PulsarkitError) as e:
        # an OSError's own text is "[Errno 2] No such file or directory: 'x'": the path first, as ours are
        text = f"{e.filename}: {e.strerror}" if isinstance(e, OSError) and e.filename and e.strerror else str(e)
        print(f"pulsarkit {args.command}: error: {visible(text)}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print(f"pulsarkit {args.command}: interrupted", file=sys.stderr)
        stop_descendants()
        return EXIT_INTERRUPTED
    finally:
        sys.stdout = stdout
        log.removeHandler(handler)


# Names in the data (topics, producers, keys, properties) are the data's: on a terminal their control
# characters would move the cursor, clear the screen or retitle the window, so they are shown escaped.
_CONTROL = {c: f"\\x{c:02x}" for c in [*range(0x00, 0x20), *range(0x7F, 0xA0)] if c not in (0x09, 0x0A)}


def visible(text: str) -> str:
    """``text`` with its control characters (but tab and newline) written as ``\\xNN``."""
    return text.translate(_CONTROL)


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class _VisibleFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return visible(super().format(record))


class TerminalText:
    """A text stream to a terminal that shows control characters escaped (:func:`visible`)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        return self._stream.write(visible(text))

    def __getattr__(self, name: str) -> Any:  # flush, isatty, fileno, encoding, buffer, ...
        return getattr(self._stream, name)


def _descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (Linux /proc), children before their own children."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # The command name (field 2) may hold spaces and parentheses: the fields after its last ')'.
        ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(name))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def stop_descendants(grace: float = 5.0) -> None:
    """Stops what this process started (a Spark driver's JVM and its Python workers ignore SIGINT,
    and a JVM whose parent died may outlive it): SIGTERM to each, SIGKILL to what is left after
    ``grace`` seconds. Their output is not ours to show: stderr is closed for them first."""
    pids = _descendants(os.getpid())
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while pids and time.monotonic() < deadline:
        for pid in list(pids):
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)  # reaps our own children; others' are reaped by their parent
            if not os.path.exists(f"/proc/{pid}") or _zombie(pid):
                pids.remove(pid)
        time.sleep(0.05)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return True
    return stat[stat.rindex(b")") + 2 : stat.rindex(b")") + 3] == b"Z"


# ------------------------------------------------------------------------------------------------
# Progress on stderr


class Progress:
    """Progress on stderr, counted in ``unit`` (``bytes``, or ``entries``: the total and every update count
    the same thing): a rich bar when rich is installed, else one rewritten line on a terminal, or a line
    every few seconds elsewhere (a log file gets no cursor escapes).

    ``enabled=None`` shows it only when stderr is a terminal."""

    #: seconds between two lines when stderr is not a terminal
    LOG_INTERVAL = 5.0

    def __init__(
        self, total: int, label: str, enabled: bool | None = None, stream: TextIO | None = None, unit: str = "bytes"
    ) -> None:
        self.stream = stream or sys.stderr
        self._tty = _is_terminal(self.stream)
        if enabled is None:
            enabled = self._tty
        self.enabled = enabled
        self.total = max(total, 1)
        self.label = label
        self.unit = unit
        self._rich: Any = None
        self._task: Any = None
        self._last = 0.0
        self._shown = -1
        if not enabled:
            return
        if self._tty:
            try:
                from rich.console import Console
                from rich.progress import BarColumn, DownloadColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn
                from rich.progress import Progress as RichProgress

                self._rich = RichProgress(
                    "[progress.description]{task.description}",
                    BarColumn(),
                    *([DownloadColumn()] if unit == "bytes" else [MofNCompleteColumn(), TextColumn(unit)]),
                    TimeRemainingColumn(),
                    console=Console(file=self.stream),
                    transient=True,
                )
                self._rich.start()
                self._task = self._rich.add_task(label, total=self.total)
            except ImportError:
                self._rich = None

    def update(self, done: int, note: str = "") -> None:
        if not self.enabled:
            return
        if self._rich is not None:
            self._rich.update(self._task, completed=min(done, self.total), description=f"{self.label} {note}".strip())
            return
        now = time.monotonic()
        if now - self._last < (0.2 if self._tty else self.LOG_INTERVAL) and done < self.total:
            return
        self._last, self._shown = now, done
        pct = 100.0 * min(done, self.total) / self.total
        line = f"{self.label}: {pct:5.1f}% ({min(done, self.total)}/{self.total} {self.unit}) {note}".rstrip()
        self.stream.write(f"\r{line}\x1b[K" if self._tty else f"{line}\n")
        self.stream.flush()

    def close(self) -> None:
        if not self.enabled:
            return
        if self._rich is not None:
            self._rich.stop()
        else:
            if self._shown < self.total:
                self._last = 0.0  # the final count, whenever the last line was
                self.update(self.total)
            if self._tty:
                self.stream.write("\n")
            self.stream.flush()


def progress_arg(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument(
        "--progress",
        dest="progress",
        action="store_true",
        default=None,
        help="always show progress on stderr",
    )
    g.add_argument("--no-progress", dest="progress", action="store_false", help="never show progress")


class OutputRefused(PulsarkitError):
    """An output path the command must not write: it exists, is a link, or is one of its inputs."""


@contextlib.contextmanager
def output_file(path: str, *, overwrite: bool = False, inputs: Sequence[str] = ()) -> Iterator[str]:
    """Yields a temporary name to write ``path``'s content to; put in place as ``path`` when the block
    succeeds, removed when it fails. Refused (:class:`OutputRefused`, nothing written): a symbolic
    link (never written through), an existing path without ``overwrite`` (and a directory always),
    and a path that is, or lies inside, one of the command's ``inputs``.

    The temporary file is new and private (0600: outputs hold the data) inside a private directory made
    beside ``path`` (0700), so no other user can swap it for a link while the command writes it by
    name. Without ``overwrite`` it is put in place by a hard link, which fails rather than replace a
    file that appeared at ``path`` meanwhile; with it, by a rename, which replaces a file (or a link
    planted since the check) and never writes through one."""
    if os.path.islink(path):
        raise OutputRefused(f"{path} is a symbolic link; pulsarkit never writes through one")
    held = input_holding(path, inputs)
    if held is not None:
        which = "one of" if os.path.realpath(path) == os.path.realpath(held) else "inside"
        raise OutputRefused(f"{path} is {which} this command's inputs ({held}); write the output elsewhere")
    if os.path.lexists(path):
        if os.path.isdir(path) or not os.path.isfile(path):
            raise OutputRefused(f"{path} exists and is not a regular file")
        if not overwrite:
            raise OutputRefused(f"{path} exists; pass --overwrite to replace it")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):  # else the error names the private directory made below it
        raise OutputRefused(f"{path}: the output's directory {parent} does not exist")
    private = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=parent)
    tmp = os.path.join(private, "out")
    try:
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
        yield tmp
        fsync_file(tmp)  # its content durable before its name: a crash never leaves an empty file as ``path``
        if overwrite:
            os.replace(tmp, path)
        else:
            try:
                os.link(tmp, path)
            except FileExistsError:
                raise OutputRefused(f"{path} appeared while the command ran; nothing replaced it") from None
            except OSError:  # a file system without hard links: the check above is the last word
                if os.path.lexists(path):
                    raise OutputRefused(f"{path} appeared while the command ran; nothing replaced it") from None
                os.rename(tmp, path)
        fsync_dir(parent)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        with contextlib.suppress(OSError):
            os.rmdir(private)


def overwrite_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--overwrite", action="store_true", help="replace an existing output file")


def output_args(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--json", action="store_true", help="one JSON object per line on stdout")
    g.add_argument("--parquet", metavar="FILE", help="write a Parquet file instead of printing")
    overwrite_arg(p)


# ------------------------------------------------------------------------------------------------
# readlog
