"""SQL in place: a query over topics of a data directory, on an embedded engine (DuckDB)::

    SELECT key, count(*) FROM topic('persistent://public/default/orders') GROUP BY key

Each ``topic('...')`` in the query (a full name, ``tenant/ns/name``, a short name or a managed-ledger name,
as :meth:`DataDir.resolve` takes them; a partitioned topic stands for all its partitions) is the topic's
messages in the one message schema, the columns ``pulsarkit messages`` has
(:data:`pulsarkit.scan.MESSAGE_FIELDS`; ``marker`` too with ``markers=True``), read by the one reader
(:func:`pulsarkit.analysis.messages.message_batches`) and handed to the engine as an Arrow
``RecordBatchReader``: the engine pulls batches as it goes, and only the referenced topics are read. Each
reference is its own read (a stream is read once), so a topic named twice (a self-join) is read twice.

The engine is sandboxed: no file system, no extensions, and the query cannot change that, so a query can
neither read other files nor write anywhere (into the data directory least of all). DuckDB was chosen by
measurement (bench/sql_engines.py, bench/RESULTS.md "SQL engine choice (issue 23)"); it is the optional
extra ``pulsarkit[sql]``, imported when a query runs.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pyarrow as pa

from ..broker.topic_name import ml_to_topic
from ..errors import PulsarkitError
from ..scan.datadir import DataDir
from ..scan.schema import arrow_schema, message_fields
from .decoded import DECODE_MODES, decode_batches, decoded_schema, topic_schema
from .messages import message_batches

#: How to get the engine, as the one line a user without it reads.
INSTALL_HINT = "SQL needs DuckDB: pip install 'pulsarkit[sql]' (or pip install duckdb)"
#: The engine's settings: nothing outside the registered streams is reachable, and the query cannot undo it.
ENGINE_CONFIG = {
    "enable_external_access": False,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "lock_configuration": True,
}


class SqlError(PulsarkitError):
    """A query the engine refused (syntax, unknown column or function, type error...): the engine's message."""


class SqlEngineMissing(SqlError):
    """The SQL engine (DuckDB, ``pulsarkit[sql]``) is not installed."""


def engine() -> ModuleType:
    """The engine's module, imported now (:class:`SqlEngineMissing` when it is not installed)."""
    try:
        import duckdb
    except ImportError as e:
        raise SqlEngineMissing(INSTALL_HINT) from e
    return duckdb


# ------------------------------------------------------------------------------ topic('...') references

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")
_REF = re.compile(r"topic\s*\(\s*'((?:[^']|'')*)'\s*\)", re.I)
_CALL = re.compile(r"topic\s*\(", re.I)


def topic_refs(sql: str) -> list[tuple[int, int, str]]:
    """The ``topic('name')`` calls of a query as (start, end, name), outside string literals, quoted
    identifiers and comments; ``''`` in the name is a quote. ``topic(`` without one literal name is a
    :class:`SqlError` (the topic must be known before the query runs)."""
    refs: list[tuple[int, int, str]] = []
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c in "'\"":  # a literal or a quoted identifier; a doubled quote stays inside
            j = i + 1
            while j < n and (sql[j] != c or sql[j + 1 : j + 2] == c):
                j += 2 if sql[j] == c else 1
            i = j + 1
        elif sql.startswith("--", i):
            j = sql.find("\n", i)
            i = n if j < 0 else j + 1
        elif sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif (w := _WORD.match(sql, i)) is not None:
            if w.group().lower() == "topic" and not sql[:i].rstrip().endswith("."):
                if (m := _REF.match(sql, i)) is not None:
                    refs.append((i, m.end(), m.group(1).replace("''", "'")))
                    i = m.end()
                    continue
                if _CALL.match(sql, i):
                    raise SqlError(f"topic() takes one topic name in single quotes: {sql[i : i + 40]!r}")
            i = w.end()
        else:
            i += 1
    return refs


def bind_topics(sql: str) -> tuple[str, list[tuple[str, str]]]:
    """The query with each ``topic('...')`` replaced by a relation of its own, and (relation, topic) pairs."""
    out, bound, last = [], [], 0
    for k, (start, end, name) in enumerate(topic_refs(sql)):
        rel = f"pulsarkit_topic_{k}"
        out += [sql[last:start], f'"{rel}"']
        bound.append((rel, name))
        last = end
    return "".join(out) + sql[last:], bound


# ------------------------------------------------------------------------------------------- queries


def _stream(
    dd: DataDir, mls: list[str], txn: str, markers: bool, decode: str | None, failed: list[BaseException]
) -> pa.RecordBatchReader:
    """A topic's messages as a reader (lazy: nothing is read until the engine pulls); an error of the read
    goes to ``failed`` as well, so that it reaches the caller as itself, not as the engine's text.
    ``decode="schema"``: typed ``key``/``value`` columns from the topic's schema (:mod:`.decoded`)."""
    batches: Iterator[pa.RecordBatch] = message_batches(dd, mls, txn=txn, markers=markers)
    if decode in (None, "bytes"):
        schema = arrow_schema(message_fields(markers))
    elif decode == "schema":
        schema = decoded_schema(topic_schema(dd, ml_to_topic(dd.resolve(mls[0]))), markers)
        batches = decode_batches(dd, batches)
    else:
        raise SqlError(f"decode must be one of {DECODE_MODES}, not {decode!r}")
    return pa.RecordBatchReader.from_batches(schema, _kept(batches, failed))


def _kept(batches: Iterator[pa.RecordBatch], failed: list[BaseException]) -> Iterator[pa.RecordBatch]:
    try:
        yield from batches
    except Exception as e:
        failed.append(e)
        raise


def query_reader(
    dd: DataDir, sql: str, *, txn: str = "committed", markers: bool = False, decode: str | None = None
) -> pa.RecordBatchReader:
    """The result of ``sql`` as a stream of Arrow batches (see the module doc). Topics are resolved first:
    one that is not there is a :class:`~pulsarkit.scan.records.DataDirError` naming it, before anything is
    read. ``txn`` and ``markers`` are :func:`message_batches`'; what cannot be read goes to ``dd.issues``
    as the read goes on. ``decode="schema"`` gives each topic's typed ``key``/``value`` columns (its schema's)."""
    duckdb = engine()
    text, bound = bind_topics(sql)
    topics = [(rel, dd.expand(name)) for rel, name in bound]
    failed: list[BaseException] = []
    con = duckdb.connect(config=dict(ENGINE_CONFIG))
    try:
        for name, mls in topics:
            con.register(name, _stream(dd, mls, txn, markers, decode, failed))
        rel = con.sql(text)
        if rel is None:  # a statement without rows (SET, CREATE ...): an empty result
            con.close()
            return pa.RecordBatchReader.from_batches(pa.schema([]), iter(()))
        reader = rel.to_arrow_reader()
    except duckdb.Error as e:
        con.close()
        raise _error(e, bound, failed) from None
    except BaseException:
        con.close()
        raise
    return pa.RecordBatchReader.from_batches(reader.schema, _results(con, reader, duckdb.Error, bound, failed))


def _error(e: Exception, bound: list[tuple[str, str]], failed: list[BaseException]) -> BaseException:
    """The reader's own error when reading a topic failed; else the engine's message on one line, in the
    query's own terms (not the relations topics were bound to), without the engine's excerpt of the query
    with a caret (it shows the rewritten query)."""
    if failed:
        return failed[0]
    msg = " ".join(line.strip() for line in str(e).split("\n\nLINE ")[0].splitlines() if line.strip())
    for rel, name in bound:
        msg = msg.replace(rel, "topic('{}')".format(name.replace("'", "''")))
    return SqlError(msg)


def _results(
    con: Any,
    reader: pa.RecordBatchReader,
    errors: type[Exception],
    bound: list[tuple[str, str]],
    failed: list[BaseException],
) -> Iterator[pa.RecordBatch]:
    """The engine's batches; the connection lives as long as they are read (errors while running typed)."""
    try:
        while True:
            try:
                b = reader.read_next_batch()
            except StopIteration:
                return
            except (errors, pa.ArrowException, OSError) as e:  # mid-stream, the engine's errors come through Arrow
                raise _error(e, bound, failed) from None
            yield b
    finally:
        con.close()


def query(
    dd: DataDir, sql: str, *, txn: str = "committed", markers: bool = False, decode: str | None = None
) -> pa.Table:
    """:func:`query_reader`'s result as one Arrow table."""
    reader = query_reader(dd, sql, txn=txn, markers=markers, decode=decode)
    return pa.Table.from_batches(list(reader), schema=reader.schema)
