"""A command line imports the module of its subcommand alone (``cli.command.load_commands``): the table that
says which module registers which subcommand stays true, and ``--help`` still lists them all."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from pulsarkit.cli import build_parser
from pulsarkit.cli import command as cli_command


def test_the_table_names_the_module_that_registers_each_subcommand():
    build_parser()  # every module loaded
    registered = {name: fn.__module__.rsplit(".", 1)[1] for name, _, fn in cli_command._COMMANDS}
    assert registered == cli_command.COMMAND_MODULE
    assert sorted(set(registered.values())) == sorted(cli_command.COMMAND_MODULES)


_PROBE = """
import json, sys
from pulsarkit.cli import main
try:
    main({argv!r})
except SystemExit:
    pass
print(json.dumps(sorted(m for m in sys.modules if m.startswith("pulsarkit.cli."))))
"""


def _loaded(argv: list[str]) -> list[str]:
    r = subprocess.run([sys.executable, "-c", _PROBE.format(argv=argv)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(("argv", "module"), [(["messages", "--help"], "datadir"), (["gc", "--help"], "gc"),
                                             (["sql", "--help"], "sql")])  # fmt: skip
def test_a_subcommand_imports_its_module_alone(argv, module):
    # (and cli.datadir, whose shared options most modules import)
    got = _loaded(argv)
    assert f"pulsarkit.cli.{module}" in got
    assert set(got) <= {"pulsarkit.cli.command", "pulsarkit.cli.datadir", f"pulsarkit.cli.{module}"}


@pytest.mark.parametrize("argv", [["--help"], ["no-such-command"], []])
def test_help_or_an_unknown_command_loads_them_all(argv):
    assert _loaded(argv) == sorted(
        ["pulsarkit.cli.command"] + [f"pulsarkit.cli.{m}" for m in cli_command.COMMAND_MODULES]
    )


def test_the_help_lists_every_subcommand():
    text = build_parser().format_help()
    for name in cli_command.COMMAND_MODULE:
        assert name in text


def test_the_program_loads_its_subcommand_before_freezing_what_it_imported():
    # pulsarkit.__main__ holds the collector off during the imports and freezes them: the subcommand's
    # module (and pyarrow, which it imports) must be among them
    probe = (
        "import gc, json, sys; sys.argv = ['pulsarkit', 'messages', '--help']; import pulsarkit.__main__; "
        "print(json.dumps(['pulsarkit.cli.datadir' in sys.modules, 'pyarrow' in sys.modules, gc.get_freeze_count()]))"
    )
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    loaded, arrow, frozen = json.loads(r.stdout.strip().splitlines()[-1])
    assert loaded and arrow
    assert frozen > 50_000  # (the command module alone, without pyarrow: under 20 000)
