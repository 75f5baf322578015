"""Small helpers the tests share (fixtures are in conftest.py)."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pulsarkit as pk
import pytest

#: A fixed wall-clock time (ms) the storage tests start from.
T0 = 1_700_000_000_000
MiB = 1024 * 1024
TIMESTAMP_INTERCEPTOR = "org.apache.pulsar.common.intercept.AppendBrokerTimestampMetadataInterceptor"
INDEX_INTERCEPTOR = "org.apache.pulsar.common.intercept.AppendIndexMetadataInterceptor"


class Clock:
    """A settable clock in ms, given to stores, managed ledgers and topics."""

    def __init__(self, t: int = T0) -> None:
        self.t = t

    def __call__(self) -> int:
        return self.t


def ml_config(**kw) -> pk.ManagedLedgerConfig:
    """A managed-ledger config that rolls over without the 10-minute minimum age."""
    kw.setdefault("minimum_rollover_time_ms", 0)
    return pk.ManagedLedgerConfig(**kw)


def entry(publish_time: int, payload: bytes = b"x", producer: str = "producer") -> bytes:
    """A single-message Pulsar entry published at ``publish_time``."""
    return pk.encode_entry(pk.message_metadata(producer, 0, publish_time), payload)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def maven_copy_dependencies(mvn: str, pom: Path, settings_dir: Path, lib: Path, what: str) -> Path:
    """Resolves ``pom``'s dependencies into ``lib`` once (``lib/.complete`` marks a finished copy).
    Only Maven's built-in central is used: any other repository a pom names is blocked, never waited
    on (and no registry host is named here). A failure fails the test in CI, skips it elsewhere."""
    if (lib / ".complete").exists():
        return lib
    settings = settings_dir / "settings.xml"
    settings.write_text(
        "<settings><mirrors><mirror><id>only-central</id><mirrorOf>*,!central</mirrorOf>"
        "<url>http://0.0.0.0/blocked</url><blocked>true</blocked></mirror></mirrors></settings>"
    )
    r = subprocess.run(
        [mvn, "-q", "-B", "-s", str(settings), "-f", str(pom), "dependency:copy-dependencies"]
        + [f"-DoutputDirectory={lib}"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if r.returncode != 0:
        msg = f"resolving {what} failed: {r.stdout[-2000:]} {r.stderr[-2000:]}"
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    (lib / ".complete").write_text("ok")
    return lib


def read_export(to: str, out: Path):
    """An export (``parquet``, ``delta``, ``iceberg``) as a reader of its format sees it: an Arrow table."""
    import pyarrow.dataset as ds
    from pulsarkit import export as px

    if to == "delta":
        from deltalake import DeltaTable

        return DeltaTable(str(out)).to_pyarrow_table()
    if to == "iceberg":
        from pyiceberg.catalog.sql import SqlCatalog

        catalog = SqlCatalog("pulsarkit", uri=f"sqlite:///{out}/{px.ICEBERG_CATALOG}", warehouse=str(out))
        try:
            return catalog.load_table(".".join(px.ICEBERG_TABLE)).scan().to_arrow()
        finally:
            catalog.engine.dispose()
    return ds.dataset(str(out), format="parquet", partitioning="hive").to_table()


def tree_digest(d: Path, inodes: bool = False) -> dict[str, str]:
    """Every name under ``d`` (links not followed) with its kind and content (and, with ``inodes``, the
    file's inode: a file replaced by an equal one differs): what a test says must not change."""
    import hashlib
    import stat

    out = {}
    for base, dirs, files in os.walk(d, followlinks=False):
        for n in dirs + files:
            p = Path(base) / n
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                out[str(p.relative_to(d))] = "link:" + os.readlink(p)
            elif stat.S_ISREG(st.st_mode):
                out[str(p.relative_to(d))] = hashlib.sha256(p.read_bytes()).hexdigest() + (
                    f":{st.st_ino}" if inodes else ""
                )
            else:
                out[str(p.relative_to(d))] = "dir"
    return out
