"""A light root: ``import pulsarkit`` and ``import pulsarkit.codec`` load neither RocksDB, Arrow datasets nor
the storage stack above the codec, and the root's lazy re-exports (PEP 562) still give every public name.

Each import runs in a fresh interpreter, since this one has long imported everything."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pulsarkit
import pytest
from datadir_fixtures import file_hashes

ROOT_INIT = Path(pulsarkit.__file__)
#: What a codec user must not pay for: RocksDB, Arrow datasets, and every layer above the codec.
HEAVY = (
    "rocksdict",
    "pyarrow.dataset",
    "pulsarkit.bookkeeper",
    "pulsarkit.metadata",
    "pulsarkit.managed_ledger",
    "pulsarkit.broker",
    "pulsarkit.scan",
    "pulsarkit.export",
    "pulsarkit.analysis",
    "pulsarkit.spark",
    "pulsarkit.cli",
)


def _loaded_after(code: str) -> set[str]:
    """The modules in ``sys.modules`` after running ``code`` in a fresh interpreter."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    return set(json.loads(r.stdout.splitlines()[-1]))


@pytest.mark.parametrize(
    "code",
    [
        "import pulsarkit",
        "import pulsarkit.codec",
        "from pulsarkit.codec import Entry, FrameDecoder, ChunkAssembler",
        "import pulsarkit as pk; pk.Entry, pk.encode_entry, pk.command, pk.PulsarkitError",
    ],
)
def test_the_codec_does_not_load_the_storage_stack(code: str) -> None:
    loaded = _loaded_after(code)
    assert pulsarkit.__name__ in loaded
    heavy = sorted(m for m in loaded if any(m == h or m.startswith(h + ".") for h in HEAVY))
    assert not heavy, f"{code!r} loaded {heavy}"


def test_import_pulsarkit_alone_loads_only_the_native_module_the_errors_and_the_lazy_hook() -> None:
    ours = {m for m in _loaded_after("import pulsarkit") if m.split(".")[0] == "pulsarkit"}
    assert ours == {"pulsarkit", "pulsarkit._native", "pulsarkit.errors", "pulsarkit.lazy"}


def _exported(package: str) -> list[str]:
    """``__all__`` of ``package``, checked in a fresh interpreter: each name resolves, to the very object its
    defining module holds (no copies), and ``dir()`` lists it."""
    code = (
        f"import importlib, sys\np = importlib.import_module({package!r})\n"
        "for n in p.__all__:\n"
        "    v = getattr(p, n)\n"
        "    m = getattr(v, '__module__', None)\n"
        "    if isinstance(m, str) and m.startswith('pulsarkit.') and not m.startswith('pulsarkit._native'):\n"
        "        assert getattr(sys.modules[m], getattr(v, '__name__', n), v) is v, n\n"
        "assert set(p.__all__) <= set(dir(p))\n"
        "print(' '.join(p.__all__))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout.split()


def test_every_public_name_resolves_and_is_the_defining_modules() -> None:
    """``pk.X`` for each name of ``__all__`` is the object its subpackage defines (no copies)."""
    assert sorted(_exported("pulsarkit")) == sorted(pulsarkit.__all__)


def test_subpackages_are_attributes_imported_on_first_use() -> None:
    loaded = _loaded_after("import pulsarkit as pk\nassert 'bookkeeper' in dir(pk)\npk.bookkeeper.scan_entry_logs")
    assert "pulsarkit.bookkeeper" in loaded and "pulsarkit.broker" not in loaded
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        pulsarkit.no_such_name  # noqa: B018


def test_type_checkers_see_what_the_root_exports_lazily() -> None:
    """The ``TYPE_CHECKING`` imports name exactly the lazy names (plus the eager ones), so a type
    checker's view of ``pulsarkit`` and ``__all__`` cannot drift apart."""
    tree = ast.parse(ROOT_INIT.read_text())
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            imported.update(a.asname or a.name for a in node.names)
    assert set(pulsarkit.__all__) <= imported, sorted(set(pulsarkit.__all__) - imported)
    lazy = pulsarkit._LAZY  # type: ignore[attr-defined]
    assert set(lazy) <= set(pulsarkit.__all__), sorted(set(lazy) - set(pulsarkit.__all__))


#: The subpackages whose names are imported on first use (``pulsarkit.lazy``).
LAZY_PACKAGES = (
    "bookkeeper",
    "broker",
    "broker.transaction",
    "codec",
    "export",
    "managed_ledger",
    "metadata",
    "scan",
    "spark",
)


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_a_lazy_subpackage_gives_what_type_checkers_see(package: str) -> None:
    """Every name a type checker sees in the subpackage's ``__init__`` (its imports, ``TYPE_CHECKING`` ones
    included) is in ``__all__`` and is, in a fresh interpreter, the very object its module defines."""
    init = Path(pulsarkit.__file__).parent.joinpath(*package.split("."), "__init__.py")
    seen = {
        a.asname or a.name
        for n in ast.walk(ast.parse(init.read_text()))
        if isinstance(n, ast.ImportFrom)
        if n.level
        for a in n.names
    } - {"exports"}
    assert set(_exported(f"pulsarkit.{package}")) == seen


def _type_checking_imports(init: Path) -> list[tuple[str, tuple[str, str]]]:
    """(name, (module relative to the package, its name there)) of each ``from .m import n`` under
    ``if TYPE_CHECKING:`` (submodules, ``from . import m``, left out)."""
    out = []
    for block in ast.walk(ast.parse(init.read_text())):
        if isinstance(block, ast.If) and isinstance(block.test, ast.Name) and block.test.id == "TYPE_CHECKING":
            for node in ast.walk(block):
                if isinstance(node, ast.ImportFrom) and node.level and node.module:
                    module = "." * node.level + node.module
                    out += [(a.asname or a.name, (module, a.name)) for a in node.names]
    return out


def _lazy_table(init: Path) -> dict[str, tuple[str, str]]:
    """Name -> (module, its name there) of the ``exports(__name__, {...})`` table (``"n as alias"`` exported as
    ``alias``)."""
    for node in ast.walk(ast.parse(init.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "exports":
            table = ast.literal_eval(node.args[1])
            out = {}
            for module, names in table.items():
                for n in names:
                    name, _, alias = n.partition(" as ")
                    out[alias or name] = (module, name)
            return out
    raise AssertionError(f"{init} has no exports(...) table")


@pytest.mark.parametrize("package", ("", *LAZY_PACKAGES))
def test_the_type_checking_imports_and_the_lazy_table_agree(package: str) -> None:
    """What a type checker sees of a lazy package (its ``TYPE_CHECKING`` imports) is what ``__getattr__``
    gives: the same names, each from the same module (mypy checks the one, the interpreter runs the other)."""
    init = Path(pulsarkit.__file__).parent.joinpath(*package.split("."), "__init__.py") if package else ROOT_INIT
    imports = _type_checking_imports(init)
    seen = dict(imports)
    assert len(seen) == len(imports), f"a name imported twice: {sorted(n for n, _ in imports)}"
    if package:
        lazy = _lazy_table(init)
    else:
        lazy = {n: (m, n) for n, m in pulsarkit._LAZY.items()}  # type: ignore[attr-defined]
    assert seen == lazy, {n: (seen.get(n), lazy.get(n)) for n in set(seen) | set(lazy) if seen.get(n) != lazy.get(n)}


def test_a_module_of_a_subpackage_loads_only_what_it_imports() -> None:
    """``managed_ledger.position`` and ``broker.topic_name`` (imported by every read) do not load the
    managed-ledger factory, bookie GC or the broker's topic."""
    loaded = _loaded_after("import pulsarkit.managed_ledger.position, pulsarkit.broker.topic_name")
    assert not loaded & {
        "pulsarkit.managed_ledger.factory",
        "pulsarkit.bookkeeper.gc",
        "pulsarkit.broker.topic",
        "pulsarkit.broker.dedup",
    }, sorted(m for m in loaded if m.startswith("pulsarkit."))
    # a module of the subpackage is still an attribute, as with the eager __init__
    assert "pulsarkit.bookkeeper.gc" in _loaded_after("import pulsarkit.bookkeeper as b\nb.gc.__name__")
    with pytest.raises(AttributeError, match="'pulsarkit.broker' has no attribute 'no_such_name'"):
        pulsarkit.broker.no_such_name  # noqa: B018
    assert not hasattr(pulsarkit.broker, "topic.x") and not hasattr(pulsarkit.broker, "_private")
    assert {"gc", "entrylog", "EntryLogReader"} <= set(dir(pulsarkit.bookkeeper))


def test_scan_plan_is_the_function_after_its_module_is_imported() -> None:
    code = (
        "import pulsarkit.scan.plan\nfrom pulsarkit.scan import plan, plan_data_dir\n"
        "import pulsarkit.scan as s\n"
        "assert callable(plan) and plan is s.plan and plan.__module__ == 'pulsarkit.scan.plan'"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]


def _copy_as_standalone(synthetic: tuple[Path, dict], dest: Path) -> Path:
    """A directory laid out as a Pulsar standalone's (``metadata/``, ``bookkeeper/``), not as pulsarkit's."""
    root, _ = synthetic
    shutil.copytree(root / "metadata", dest / "metadata")
    shutil.copytree(root / "bookie", dest / "bookkeeper")
    return dest


def test_root_store_open_still_reaches_the_data_dir_reader(synthetic, tmp_path: Path) -> None:
    """``pk.Store.open`` on a real data directory gives the read-only reader in a fresh interpreter too:
    the lazy root loads the layer that registers the hook with ``Store``."""
    standalone = _copy_as_standalone(synthetic, tmp_path / "standalone")
    code = f"import pulsarkit as pk\nprint(type(pk.Store.open({str(standalone)!r})).__name__)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ["DataDir"]
    assert not (standalone / "bookie").exists()


def test_store_open_without_the_reader_refuses_a_foreign_directory(synthetic, tmp_path: Path) -> None:
    """Without the reader's layer loaded, ``Store.open`` refuses a real data directory instead of
    creating pulsarkit's ``bookie/`` inside it."""
    standalone = _copy_as_standalone(synthetic, tmp_path / "standalone")
    before = file_hashes(standalone)
    code = (
        "import sys\nfrom pulsarkit.errors import ManagedLedgerError\n"
        "from pulsarkit.managed_ledger import Store\n"
        "assert 'pulsarkit.scan' not in sys.modules\n"
        f"try:\n    Store.open({str(standalone)!r})\nexcept ManagedLedgerError as e:\n    print(e)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "is a Pulsar data directory" in r.stdout
    assert not (standalone / "bookie").exists() and file_hashes(standalone) == before


#: The read paths, each in a fresh interpreter over the synthetic directory (transactions, chunks, markers,
#: several topics); ``{data}`` and ``{out}`` are filled in.
READ_PATHS = {
    "messages parquet": "main(['messages', {data!r}, '--format', 'parquet', '-o', {out!r} + '/m.parquet'])",
    "messages jsonl": "main(['messages', {data!r}, '--format', 'jsonl', '-o', {out!r} + '/m.jsonl', '--markers'])",
    "export local": "main(['export', {data!r}, '--to', 'parquet', {out!r} + '/export', '--engine', 'local'])",
    "messages_table": "messages_table(open_data_dir({data!r}), None, markers=True)",
    "message_batches after a position": (
        "dd = open_data_dir({data!r}); t = messages_table(dd, None).column('topic')[0].as_py()\n"
        "assert list(message_batches(dd, t, after={{t: Position(0, 0)}}))"
    ),
    "read_all entries, filtered": (
        "assert read_all({data!r}, kind='entries', filters=[('ledger_id', '>=', 0), ('entry_id', 'in', [0, 1])])"
    ),
}
#: Records who imports pandas (pyarrow does, lazily, from ``pa.array``/``pa.scalar`` of Python objects and
#: ``group_by``: 0.2-0.3 s of a read's start-up), prometheus_client (the transaction buffered writer's
#: metrics, 0.03 s) or the managed-ledger factory with the bookie GC it runs (~25 ms): no read path needs them.
_PANDAS_SPY = """
import sys, traceback
class _Spy:
    def find_spec(self, name, path=None, target=None):
        if name in ("pandas", "prometheus_client", "pulsarkit.managed_ledger.factory", "pulsarkit.bookkeeper.gc"):
            sys.stderr.write(name + " IMPORTED FROM\\n" + "".join(traceback.format_stack(limit=12)))
        return None
sys.meta_path.insert(0, _Spy())
from pulsarkit.cli import main
from pulsarkit.analysis.messages import message_batches, messages_table
from pulsarkit.managed_ledger.position import Position
from pulsarkit.scan.datadir import open_data_dir
from pulsarkit.scan.read import read_all
"""


@pytest.mark.skipif(shutil.which("true") is None, reason="no POSIX tools")
@pytest.mark.parametrize("path", sorted(READ_PATHS))
def test_the_read_paths_do_not_import_pandas_or_prometheus(synthetic, tmp_path: Path, path: str) -> None:
    pytest.importorskip("pandas", reason="pandas not installed: nothing could import it")
    data, _ = synthetic
    code = _PANDAS_SPY + READ_PATHS[path].format(data=str(data), out=str(tmp_path))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert "IMPORTED FROM" not in r.stderr, r.stderr[-4000:]
    # 1: the synthetic directory's data problems, reported (a command's exit code), never a traceback
    assert r.returncode in (0, 1) and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert any(tmp_path.iterdir()) or not path.startswith(("messages ", "export"))


def test_a_deferred_module_is_imported_at_its_first_use_and_its_names_kept() -> None:
    code = (
        "import sys\n"
        "from pulsarkit.lazy import deferred\n"
        "m = deferred('colorsys')\n"
        "assert 'colorsys' not in sys.modules and repr(m) == \"<deferred module 'colorsys'>\"\n"
        "assert not hasattr(m, '__wrapped__') and 'colorsys' not in sys.modules\n"  # a probe is not a use
        "f = m.rgb_to_hsv\n"
        "assert 'colorsys' in sys.modules and f is sys.modules['colorsys'].rgb_to_hsv and 'rgb_to_hsv' in vars(m)\n"
        "try:\n"
        "    m.no_such_name\n"
        "except AttributeError:\n"
        "    pass\n"
        "else:\n"
        "    raise AssertionError('a name the module lacks')\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
