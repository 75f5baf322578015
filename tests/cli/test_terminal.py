"""Names from the data reach a terminal with their control characters escaped (issue 21 item 10: a
topic named with escape sequences cleared the operator's screen). Piped output is left as it is."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pulsarkit as pk
from pulsarkit.cli.command import visible

EVIL = "public/default/persistent/evil\x1b[2J\x1b]0;owned\x07\r"


def _data(root: Path) -> Path:
    with pk.Store.open(root) as store:
        ml = store.managed_ledger(EVIL)
        ml.add_entry(pk.encode_entry(pk.message_metadata("p\x1b[31m", 0, 1_700_000_000_000), b"v"))
    return root


def _on_a_terminal(*args: str) -> tuple[int, bytes]:
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "pulsarkit", *args], stdin=subprocess.DEVNULL, stdout=follower, stderr=follower
    )
    os.close(follower)
    out = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the other side closed
            break
        if not chunk:
            break
        out += chunk
    os.close(leader)
    return proc.wait(timeout=120), out


def test_visible_escapes_controls_but_tab_and_newline() -> None:
    assert visible("a\x1b[2Jb\tc\nd\r\x9b\x7f") == "a\\x1b[2Jb\tc\nd\\x0d\\x9b\\x7f"
    assert visible("plain topic é ☃") == "plain topic é ☃"


def test_topic_names_with_escape_sequences_are_shown_escaped_on_a_terminal(tmp_path: Path) -> None:
    data = _data(tmp_path / "data")
    rc, out = _on_a_terminal("topics", str(data))
    assert rc == 0, out
    assert b"\x1b" not in out and b"\x07" not in out
    assert b"evil\\x1b[2J\\x1b]0;owned\\x07\\x0d" in out
    piped = subprocess.run(
        [sys.executable, "-m", "pulsarkit", "topics", str(data), "--format", "json"], capture_output=True
    )
    assert piped.returncode == 0 and b"\\u001b[2J" in piped.stdout  # JSON escapes them itself
