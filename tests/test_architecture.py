"""The package's shape (ARCHITECTURE.md): the layer contract, imports at module level only, no module
importing the package root, and a README that names the layers the code has."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PKG = REPO / "python" / "pulsarkit"
#: Third-party packages that are optional extras, and prometheus_client (the transaction writer's metrics,
#: 0.03 s of every command's start that no read needs: tests/test_imports.py keeps it off the read paths);
#: only these may be imported inside functions.
OPTIONAL = {"pyspark", "pandas", "rich", "tqdm", "pulsar", "deltalake", "pyiceberg", "duckdb", "prometheus_client"}


def _modules() -> list[Path]:
    return sorted(p for p in PKG.rglob("*.py"))


def _type_checking_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def test_layer_contract_holds() -> None:
    """import-linter's ``layers`` contract from pyproject.toml."""
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert exe, "import-linter is a test dependency (scripts/requirements-test.txt)"
    proc = subprocess.run(
        [exe, "--no-cache", str(REPO / "pyproject.toml")], cwd=REPO / "python", capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 kept, 0 broken" in proc.stdout


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PKG)))
def test_imports_are_at_module_level(path: Path) -> None:
    """No function-level imports, except of optional third-party packages (pyspark, pandas, ...)."""
    tree = ast.parse(path.read_text(), str(path))
    top = {id(n) for n in tree.body}
    for n in tree.body:
        if _type_checking_block(n):
            top.update(id(c) for c in ast.walk(n))
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in top:
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if node.__class__ is ast.ImportFrom and node.level:
                bad.append(f"line {node.lineno}: relative import inside a function")
            elif any(n.split(".")[0] not in OPTIONAL for n in names):
                bad.append(f"line {node.lineno}: import of {names} inside a function")
    assert not bad, bad


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PKG)))
def test_no_module_imports_the_package_root(path: Path) -> None:
    """Only the native module is taken from the root (it is not Python source, so the layer
    contract sees it as the root); anything else from the root would hide a layer violation."""
    tree = ast.parse(path.read_text(), str(path))
    rel = path.relative_to(PKG)
    depth = len(rel.parts) - 1  # packages between the root and this module
    if path.name == "__init__.py" and depth == 0:
        return
    submodules = {p.stem for p in PKG.iterdir() if p.suffix == ".py"} | {p.name for p in PKG.iterdir() if p.is_dir()}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == depth + 1 and not node.module:
            names = {a.name for a in node.names}
            assert names <= submodules | {"_native"}, f"line {node.lineno}: {names - submodules} from the package root"
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "pulsarkit":
            pytest.fail(f"line {node.lineno}: absolute import of the package root")


def _layer_table() -> list[tuple[int, str, str]]:
    """ARCHITECTURE.md's layers table as (layer number, package cell, modules cell) rows."""
    text = (REPO / "ARCHITECTURE.md").read_text()
    section = text.split("## Layers (top to bottom)", 1)[1].split("\n## ", 1)[0]
    rows = [line.strip().strip("|").split("|") for line in section.splitlines() if line.startswith("|")]
    assert rows and [c.strip() for c in rows[0]] == ["layer", "package", "modules"], rows[:1]
    return [(int(layer), package.strip(), modules) for layer, package, modules in rows[2:]]


def _contract_layers() -> list[set[str]]:
    contract = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"][0]
    assert contract["type"] == "layers"
    return [{m.strip().removeprefix("pulsarkit.") for m in layer.split("|")} for layer in contract["layers"]]


def _top_level() -> set[str]:
    """The package's top-level modules and subpackages, as named in the table (``bulk.py``, ``cli/``)."""
    return {p.name for p in PKG.glob("*.py") if p.name != "__init__.py"} | {
        f"{p.name}/" for p in PKG.iterdir() if (p / "__init__.py").exists()
    }


def test_architecture_md_layers_are_the_contracts() -> None:
    """The table's rows, grouped by layer number, are import-linter's layers in the same order, and every
    top-level module and subpackage has a row (``_native``, the Rust core, is outside the contract)."""
    table = _layer_table()
    named = [package.strip("`") for _, package, _ in table]
    assert sorted(n for n in named if n != "_native") == sorted(_top_level()), "a package has no row, or a stale one"
    numbers = [layer for layer, _, _ in table]
    assert numbers == sorted(numbers) and set(numbers) == set(range(1, max(numbers) + 1)), numbers
    grouped = [
        {n.removesuffix("/").removesuffix(".py") for (layer, _, _), n in zip(table, named) if layer == k} - {"_native"}
        for k in range(1, max(numbers) + 1)
    ]
    assert grouped == _contract_layers()


@pytest.mark.parametrize("row", _layer_table(), ids=lambda r: r[1].strip("`"))
def test_architecture_md_names_every_module_in_its_layer_row(row: tuple[int, str, str]) -> None:
    """Each package's row names exactly its modules (``topic.py``, ``transaction/log.py``): none
    missing, none that no longer exists."""
    package = row[1].strip("`")
    if not package.endswith("/"):
        return  # a top-level module: its row is the module itself
    root = PKG / package
    modules = {str(p.relative_to(root)) for p in root.rglob("*.py") if p.name != "__init__.py"}
    spans = set(re.findall(r"`([\w/]+\.py)`", row[2]))
    # `scan/datadir.py` in another package's row is a cross-reference, not one of its modules
    others = {p.name for p in PKG.iterdir() if p.is_dir()} - {p.name for p in root.iterdir() if p.is_dir()}
    named = {n for n in spans if n.split("/")[0] not in others}
    assert not modules - named, f"ARCHITECTURE.md's {package} row does not name {sorted(modules - named)}"
    assert not named - modules, f"ARCHITECTURE.md's {package} row names missing {sorted(named - modules)}"


def test_ruff_lint_including_the_configured_line_length() -> None:
    exe = shutil.which("ruff", path=str(Path(sys.executable).parent))
    assert exe, "ruff is a test dependency (scripts/requirements-test.txt)"
    proc = subprocess.run([exe, "check", "python", "tests", "bench"], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-4000:]
