"""RocksDB, opened the ways BookKeeper's ``KeyValueStorageRocksDB`` and Pulsar's RocksDB metadata store
need: the one place pulsarkit opens a RocksDB database.

* :func:`open_writable` creates or opens a database pulsarkit writes (block format 5, so the older
  RocksDB releases BookKeeper's and Pulsar's JNI builds bundle read it; synced writes).
* :class:`ReadOnlyCopy` opens a database pulsarkit must not touch: the files are copied to a private
  temporary directory (without ``LOCK`` and ``LOG*``) and the copy is opened read-only, its WAL
  replayed there. RocksDB writes ``LOCK``, ``LOG`` and options files into any directory it opens,
  even read-only, so the original is never opened at all.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

import rocksdict

from ..errors import PulsarkitError


def _error(error: type[PulsarkitError], path: str, what: str, e: BaseException) -> PulsarkitError:
    text = str(e)
    if "lock" in text.lower():
        return error(f"{what} {path} is in use by another process (RocksDB lock held): {text}")
    return error(f"{what} {path}: not a readable RocksDB database: {text}")


def open_writable(
    path: str,
    *,
    sync: bool = True,
    error: type[PulsarkitError] = PulsarkitError,
    what: str = "RocksDB database",
) -> Any:
    """Opens (creating it) a database pulsarkit owns. A database another process holds open is a
    typed ``error`` saying it is in use."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    opts = rocksdict.Options(raw_mode=True)
    opts.create_if_missing(True)
    table = rocksdict.BlockBasedOptions()
    table.set_format_version(5)
    opts.set_block_based_table_factory(table)
    try:
        db = rocksdict.Rdict(path, opts)
    except Exception as e:  # noqa: BLE001 - rocksdict raises plain Exception
        raise _error(error, path, what, e) from None
    wo = rocksdict.WriteOptions()
    wo.sync = sync
    db.set_write_options(wo)
    return db


def write_batch() -> Any:
    """An atomic batch of puts and deletes for a database from :func:`open_writable`."""
    return rocksdict.WriteBatch(raw_mode=True)


class ReadOnlyCopy:
    """A read-only view of a database through a private copy; ``close()`` removes the copy."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        error: type[PulsarkitError] = PulsarkitError,
        what: str = "RocksDB database",
    ) -> None:
        self.path = os.fspath(path)
        if not os.path.isfile(os.path.join(self.path, "CURRENT")):
            raise error(f"{what} {self.path}: not a RocksDB database (no CURRENT file)")
        self._tmp: str | None = tempfile.mkdtemp(prefix="pulsarkit-rocksdb-")
        try:
            db_dir = os.path.join(self._tmp, "db")
            os.mkdir(db_dir)
            for name in sorted(os.listdir(self.path)):
                src = os.path.join(self.path, name)
                if name == "LOCK" or name.startswith("LOG") or not os.path.isfile(src):
                    continue
                shutil.copyfile(src, os.path.join(db_dir, name))
            try:
                self.db = rocksdict.Rdict(
                    db_dir, rocksdict.Options(raw_mode=True), access_type=rocksdict.AccessType.read_only()
                )
            except Exception as e:  # noqa: BLE001 - rocksdict raises plain Exception
                raise _error(error, self.path, what, e) from None
        except OSError as e:
            self.close()
            raise error(f"{what} {self.path}: cannot be read: {e}") from None
        except BaseException:
            self.close()
            raise

    def get(self, key: bytes) -> bytes | None:
        v = self.db.get(key)
        return None if v is None else bytes(v)

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        """Every key/value pair in key order."""
        it = self.db.iter()
        it.seek_to_first()
        while it.valid():
            yield bytes(it.key()), bytes(it.value())
            it.next()

    def close(self) -> None:
        db = self.__dict__.pop("db", None)
        if db is not None:
            db.close()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self) -> ReadOnlyCopy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_all(
    path: str | os.PathLike[str],
    *,
    error: type[PulsarkitError] = PulsarkitError,
    what: str = "RocksDB database",
) -> list[tuple[bytes, bytes]]:
    """Every key/value pair of a database pulsarkit must not touch, in key order."""
    with ReadOnlyCopy(path, error=error, what=what) as db:
        return list(db.items())


__all__ = ["ReadOnlyCopy", "open_writable", "read_all", "write_batch"]
