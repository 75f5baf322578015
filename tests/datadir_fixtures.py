"""Synthetic data directories for the analysis tests, written with pulsarkit's own writers."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulsarkit as pk
from pulsarkit.bookkeeper.ledger_storage import DbLedgerStorage, SingleDirectoryDbLedgerStorage
from pulsarkit.metadata.store import MetadataStore
from pulsarkit.proto import LedgerMetadataFormat, PositionInfo

try:
    from pulsarkit.bookkeeper import pack_entry as pack_bookie_entry
except ImportError:  # before the layered package
    from pulsarkit.bookkeeper import pack_entry as pack_bookie_entry

ORDERS = "public/default/persistent/orders"
TXN_TOPIC = "public/default/persistent/payments"
PARTS = "public/default/persistent/parts-partition-1"
TC_LOG = "pulsar/system/persistent/__transaction_log_0"


# ------------------------------------------------------------------------------ protobuf bits


def _v(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _f(no: int, v: int | bytes) -> bytes:
    if isinstance(v, int):
        return _v(no << 3) + _v(v)
    return _v(no << 3 | 2) + _v(len(v)) + v


def txn_record(
    op: int, most: int, least: int, new_status: int | None = None, partitions=(), expected_status: int | None = None
) -> bytes:
    b = _f(1, op) + _f(2, least) + _f(3, most)
    if expected_status is not None:
        b += _f(4, expected_status)
    if new_status is not None:
        b += _f(5, new_status)
    for p in partitions:
        b += _f(6, p.encode())
    if op == 0:
        b += _f(8, 60_000) + _f(9, 1000)
    return b


def pending_ack_record(op: int, most: int, least: int, positions=(), cumulative: bool = False) -> bytes:
    """``PendingAckMetadataEntry``: op ACK=1 COMMIT=2 ABORT=3; positions as (ledger, entry, ack_set words)."""
    b = _f(1, op) + _f(2, 1 if cumulative else 0) + _f(3, least) + _f(4, most)
    for lid, eid, words in positions:
        b += _f(5, _f(1, lid) + _f(2, eid) + b"".join(_f(3, w) for w in words) + (_f(4, 3) if words else b""))
    return b


def batched(records: list[bytes]) -> bytes:
    return b"\x0e\x01\x00\x01" + b"".join(_f(1, r) for r in records)


# ------------------------------------------------------------------------------ the fixture


def _md(seq: int, **kw):
    return pk.message_metadata("prod-1", seq, 1_700_000_000_000 + seq, **kw)


def _raw_ledger(store, custom: dict[str, bytes], payloads: list[bytes], closed: bool = True) -> int:
    """A ledger written directly (metadata + bookie), for kinds a managed ledger does not make."""
    lid = store.metadata.generate_ledger_id()
    lmd = LedgerMetadataFormat(
        quorumSize=1,
        ensembleSize=1,
        ackQuorumSize=1,
        length=sum(map(len, payloads)),
        state=LedgerMetadataFormat.CLOSED if closed else LedgerMetadataFormat.OPEN,
        digestType=3,
        password=b"",
        ctime=1,
    )
    if closed:
        lmd.lastEntryId = len(payloads) - 1
    seg = lmd.segment.add()
    seg.ensembleMember.append("127.0.0.1:3181")
    seg.firstEntryId = 0
    for k, v in custom.items():
        e = lmd.customMetadata.add()
        e.key, e.value = k, v
    store.metadata.put_ledger_metadata(lid, lmd)
    store.bookie.create_ledger(lid)
    total = 0
    for i, p in enumerate(payloads):
        total += len(p)
        store.bookie.add_entry(pack_bookie_entry(lid, i, p, last_add_confirmed=i - 1, length=total))
    store.bookie.flush()
    return lid


def _journal(path: Path, records: list[bytes], torn: bytes = b"") -> None:
    """A V6 journal: 512-byte header, ``[len][entry]`` records, then preallocated zeros (or a torn record)."""
    head = b"BKLG" + struct.pack(">i", 6)
    body = b"".join(struct.pack(">i", len(r)) + r for r in records)
    path.write_bytes(head.ljust(512, b"\0") + body + torn + (b"" if torn else b"\0" * 4096))


def build(root: Path) -> dict:
    """Writes the synthetic data directory; returns what was written."""
    facts: dict = {}
    store = pk.Store.open(root, sync=False)

    def cfg() -> pk.ManagedLedgerConfig:  # one interceptor per managed ledger, as the broker makes one per topic
        return pk.ManagedLedgerConfig(
            managed_ledger_interceptor=pk.broker.managed_ledger_interceptor(
                (pk.broker.INDEX_INTERCEPTOR, pk.broker.TIMESTAMP_INTERCEPTOR)
            ),
            max_entries_per_ledger=4,
            minimum_rollover_time_ms=0,
        )

    ml = store.managed_ledger(ORDERS, cfg())
    sent = []
    for i in range(6):
        ml.add_entry(
            pk.encode_entry(
                _md(i, partition_key=f"k{i}", event_time=5 + i if i % 2 else 0, properties=[("n", str(i))]),
                b"v%d" % i,
            )
        )
        sent.append(b"v%d" % i)
    batch = pk.encode_batch(_md(6), [b"b0", {"payload": b"b1", "key": "bk"}, b"b2"], compression="LZ4")
    bpos = ml.add_entry(batch, num_messages=3)
    facts["batch_pos"] = bpos
    # a chunked message: three entries, one uuid
    whole = b"chunk-" * 100
    parts = [whole[:250], whole[250:500], whole[500:]]
    for cid, part in enumerate(parts):
        ml.add_entry(
            pk.encode_entry(
                _md(
                    7,
                    uuid="prod-1-7",
                    chunk_id=cid,
                    num_chunks_from_msg=3,
                    total_chunk_msg_size=len(whole),
                    uncompressed_size=len(whole),
                ),
                part,
            )
        )
    facts["chunk"] = whole
    # an encrypted message: never shown as clear text
    md = _md(8)
    ek = md.encryption_keys.add()
    ek.key, ek.value = "rsa", b"\x01\x02"
    md.encryption_algo = "RSA"
    ml.add_entry(pk.encode_entry(md, b"ciphertext-bytes"))
    c = ml.open_cursor("sub-ind", initial_position="earliest")
    ids = [p for p, _ in ml.read(ml.first_position, 100)]
    facts["ids"] = ids
    c.mark_delete(ids[0])
    c.delete(ids[2])
    c.delete(bpos, ack_set=[0b101])  # batch index 1 acknowledged
    ml.open_cursor("sub-none", initial_position="earliest")
    ml.flush()

    # a partition of a partitioned topic
    pml = store.managed_ledger(PARTS, cfg())
    pml.add_entry(pk.encode_entry(_md(0), b"p0"))
    pml.flush()
    store.metadata.put(
        "/admin/partitioned-topics/public/default/persistent/parts", json.dumps({"partitions": 2}).encode()
    )

    # transactions: the coordinator's log (batched and single records) and a topic with markers
    tc = store.managed_ledger(TC_LOG, pk.ManagedLedgerConfig())
    tc.add_entry(
        batched(
            [
                txn_record(0, 0, 1),
                txn_record(0, 0, 2),
                txn_record(0, 0, 3),
                txn_record(1, 0, 1, partitions=["persistent://public/default/payments"]),
            ]
        )
    )
    # as the coordinator writes them: each update names the status it expects (OPEN=0, COMMITTING=1, ABORTING=3)
    tc.add_entry(txn_record(3, 0, 1, new_status=1, expected_status=0))
    tc.add_entry(
        batched(
            [
                txn_record(3, 0, 1, new_status=2, expected_status=1),
                txn_record(3, 0, 2, new_status=3, expected_status=0),
                txn_record(3, 0, 2, new_status=4, expected_status=3),
            ]
        )
    )
    tc.flush()
    tml = store.managed_ledger(TXN_TOPIC, cfg())
    tml.add_entry(pk.encode_entry(_md(0), b"plain"))
    tml.add_entry(pk.encode_entry(_md(1, txnid_most_bits=0, txnid_least_bits=1), b"committed"))
    tml.add_entry(pk.encode_entry(_md(2, txnid_most_bits=0, txnid_least_bits=2), b"aborted"))
    tml.add_entry(pk.encode_entry(_md(3, txnid_most_bits=0, txnid_least_bits=3), b"open"))
    tml.add_entry(pk.encode_entry(_md(4, txnid_most_bits=0, txnid_least_bits=1, marker_type=21), b""))
    tml.add_entry(pk.encode_entry(_md(5, txnid_most_bits=0, txnid_least_bits=2, marker_type=22), b""))
    tml.add_entry(pk.encode_entry(_md(6), b"after-open"))
    tml.flush()

    # ledgers of the other kinds
    facts["schema"] = _raw_ledger(
        store, {"application": b"pulsar", "component": b"schema", "pulsar/schemaId": b"x"}, [b"schema"]
    )
    facts["compacted"] = _raw_ledger(
        store,
        {
            "application": b"pulsar",
            "component": b"compacted-ledger",
            "pulsar/compactedTopic": b"persistent://public/default/orders",
        },
        [b"c"],
    )
    # a cursor whose state lives in its cursor ledger (the broker's normal case)
    # the pending-ack store of sub-none: a committed, an aborted and an open transaction's acks
    pa_ml = store.managed_ledger(ORDERS + "-sub-none" + "__transaction_pending_ack", pk.ManagedLedgerConfig())
    pa_ml.add_entry(batched([pending_ack_record(1, 0, 7, [(*ids[1], [])]), pending_ack_record(2, 0, 7)]))
    pa_ml.add_entry(pending_ack_record(1, 0, 8, [(*ids[3], [])]))
    pa_ml.add_entry(pending_ack_record(3, 0, 8))
    pa_ml.add_entry(pending_ack_record(1, 0, 9, [(*bpos, [0b011])]))  # batch index 2, transaction left open
    pa_ml.flush()
    pi = PositionInfo(ledgerId=ids[3].ledger_id, entryId=ids[3].entry_id)
    bi = pi.batchedEntryDeletionIndexInfo.add()
    bi.position.ledgerId, bi.position.entryId = bpos
    bi.deleteSet.append(0b110)  # batch index 0 acknowledged
    rg = pi.individualDeletedMessages.add()
    rg.lowerEndpoint.ledgerId, rg.lowerEndpoint.entryId = ids[4]
    rg.upperEndpoint.ledgerId, rg.upperEndpoint.entryId = ids[5]
    old = PositionInfo(ledgerId=ids[0].ledger_id, entryId=ids[0].entry_id)
    facts["cursor_ledger"] = _raw_ledger(
        store,
        {
            "application": b"pulsar",
            "component": b"managed-ledger",
            "pulsar/managed-ledger": ORDERS.encode(),
            "pulsar/cursor": b"sub-ledger",
        },
        [old.SerializeToString(), pi.SerializeToString()],
    )
    ci = pk.proto.ManagedCursorInfo(
        cursorsLedgerId=facts["cursor_ledger"],
        markDeleteLedgerId=ids[0].ledger_id,
        markDeleteEntryId=ids[0].entry_id,
    )
    store.metadata.put_cursor_info(ORDERS, "sub-ledger", ci)
    # a deleted ledger: on the bookie, no metadata any more
    facts["deleted"] = _raw_ledger(store, {"application": b"pulsar"}, [b"gone"])
    store.metadata.delete_ledger_metadata(facts["deleted"])
    facts["orders_ledgers"] = [li.ledger_id for li in ml.ledgers()]
    store.close()
    return facts


def _add_journal_tail(root: Path, facts: dict, torn: bool = False) -> None:
    """Simulates SIGKILL: the orders topic's last ledger is re-opened in metadata with two more
    entries that only the journal holds."""
    # metadata and bookie opened directly: re-opening the managed ledger would rewrite its cursors
    md_store = pk.metadata.MetadataStore(root / "metadata")
    lid = md_store.managed_ledger_info(ORDERS)[0].ledgerInfo[-1].ledgerId
    md_store.close()
    bk = pk.bookkeeper.DbLedgerStorage(root / "bookie")
    n = bk.last_entry_id(lid) + 1
    bk.close()
    md_store = pk.metadata.MetadataStore(root / "metadata")
    lmd, st = md_store.ledger_metadata(lid)
    lmd.state = LedgerMetadataFormat.OPEN
    lmd.ClearField("lastEntryId")
    md_store.put_ledger_metadata(lid, lmd)
    md_store.close()
    recs = [
        pack_bookie_entry(lid, n + i, pk.encode_entry(_md(100 + i), b"journal-%d" % i), last_add_confirmed=n + i - 1)
        for i in range(2)
    ]
    tail = b""
    if torn:
        extra = pack_bookie_entry(lid, n + 2, pk.encode_entry(_md(102), b"torn"), last_add_confirmed=n + 1)
        tail = struct.pack(">i", len(extra)) + extra[: len(extra) // 2]
    _journal(root / "bookie" / "current" / "19a0000000.txn", recs, tail)
    facts["journal_ledger"] = lid
    facts["journal_first"] = n


def build_synthetic(tmp_path_factory) -> tuple[Path, dict]:
    """The synthetic data directory (a fixture's body: each test module builds its own once)."""
    root = tmp_path_factory.mktemp("synthetic") / "data"
    facts = build(root)
    _add_journal_tail(root, facts)
    # drop pulsarkit's own LOCK files: a foreign directory has none of ours
    for p in root.rglob("LOCK"):
        p.unlink()
    return root, facts


def file_hashes(root: Path) -> dict[str, tuple[str, int]]:
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            out[str(p.relative_to(root))] = (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
        else:
            out[str(p.relative_to(root)) + "/"] = ("dir", p.stat().st_mtime_ns)
    return out


def tmp_copies() -> set[str]:

    return {n for n in os.listdir(tempfile.gettempdir()) if n.startswith("pulsarkit-rocksdb-")}


# ------------------------------------------------------------------------------ many bookies

BOOKIE_A, BOOKIE_B, BOOKIE_C = "10.0.0.1:3181", "10.0.0.2:3181", "10.0.0.3:3181"
BOOKIE_IDS = (BOOKIE_A, BOOKIE_B, BOOKIE_C)


def direct_write_set(segments: list[tuple[int, list[str]]], qw: int, e: int) -> list[str]:
    """BookKeeper's rule, spelled out: the last segment starting at or before ``e``; its members
    ``(e + k) % E`` for ``k < Qw``."""
    ens = segments[0][1]
    for first, members in segments:
        if first <= e:
            ens = members
    return [ens[(e + k) % len(ens)] for k in range(qw)]


def build_cluster_source(root: Path, entries: int = 13, more: Callable[[Any], Any] | None = None) -> dict:
    """A topic (``ORDERS``) written by pulsarkit's managed ledger on one bookie under ``root/src``; a
    pristine copy of it (``root/single``); and the metadata store rewritten as a three-bookie cluster
    would have it (ensemble 3, write quorum 2, ack quorum 2; the second ledger had an ensemble change
    at entry 2, members swapped, so its write sets move). ``more(store)`` writes more ledgers first;
    what it returns is ``["more"]``."""
    store = pk.Store.open(root / "src", sync=False)
    ml = store.managed_ledger(ORDERS, pk.ManagedLedgerConfig(max_entries_per_ledger=5, minimum_rollover_time_ms=0))
    sent = []
    for i in range(entries):
        payload = b"order-%d-" % i + bytes([i]) * (i * 7)
        md = pk.message_metadata("prod-1", i, 1_700_000_000_000 + i)
        ml.add_entry(pk.encode_entry(md, payload))
        sent.append(payload)
    ml.close()
    extra = more(store) if more is not None else None
    store.close()
    shutil.copytree(root / "src", root / "single")
    segments: dict[int, list[tuple[int, list[str]]]] = {}
    with MetadataStore(root / "src" / "metadata") as ms:
        for n, lid in enumerate(ms.ledger_ids()):
            md, stat = ms.ledger_metadata(lid)
            md.ensembleSize, md.quorumSize, md.ackQuorumSize = 3, 2, 2
            del md.segment[:]
            segs = [(0, [BOOKIE_A, BOOKIE_B, BOOKIE_C])] + ([(2, [BOOKIE_A, BOOKIE_C, BOOKIE_B])] if n == 1 else [])
            for first, members in segs:
                s = md.segment.add()
                s.firstEntryId = first
                s.ensembleMember.extend(members)
            ms.put_ledger_metadata(lid, md, expected_version=stat.version)
            segments[lid] = segs
    return {"root": root, "sent": sent, "segments": segments, "ledgers": sorted(segments), "more": extra}


def write_cookie(d: Path, bookie_id: str) -> None:
    """A real bookie's cookie (layout 5, text-format ``CookieFormat``) in ``d/current/VERSION``."""
    (d / "current" / "VERSION").write_text(
        f'5\nbookieHost: "{bookie_id}"\njournalDir: "{d}"\nledgerDirs: "1\\t{d}"\n'
        'instanceId: "817f8adb-dbf6-414f-a6df-a08796f47e30"\n'
    )


def build_bookies(
    source: dict,
    dest: Path,
    *,
    skip: set[tuple[str, int, int | None]] = frozenset(),
    extra: set[tuple[str, int, int]] = frozenset(),
    cookies: bool = True,
) -> tuple[list[Path], dict]:
    """Three bookie directories (of :func:`build_cluster_source`'s cluster) holding each entry on its
    write set; ``skip`` leaves out (bookie, ledger, entry or None for all), ``extra`` adds a copy
    outside the write set. Returns the dirs and each copy's location."""
    src = DbLedgerStorage([source["root"] / "src" / "bookie"], read_only=True)
    dirs = [dest / f"bk{i}" for i in range(3)]
    stores = {b: SingleDirectoryDbLedgerStorage(str(d), sync=False) for b, d in zip(BOOKIE_IDS, dirs, strict=True)}
    put: list[tuple[str, int, int]] = []
    for lid, segs in source["segments"].items():
        for eid in src.entry_ids(lid):
            raw = src.read_entry(lid, eid)
            for b in direct_write_set(segs, 2, eid) + [x for x, lx, ex in extra if (lx, ex) == (lid, eid)]:
                if (b, lid, eid) in skip or (b, lid, None) in skip:
                    continue
                stores[b].set_master_key(lid, src.ledger_data(lid).masterKey)
                stores[b].add_entry(lid, eid, raw)
                put.append((b, lid, eid))
    locs = {}
    for b, s in stores.items():
        s.flush()
    for b, lid, eid in put:
        locs[(b, lid, eid)] = stores[b].location(lid, eid)
    for b, s in stores.items():
        s.close()
    src.close()
    if cookies:
        for b, d in zip(BOOKIE_IDS, dirs, strict=True):
            write_cookie(d, b)
    return dirs, locs


def forge_last_entry(root: Path, copy: Path, mls: dict[str, str], last: int) -> dict[str, tuple[int, int]]:
    """A copy of the data directory ``root`` at ``copy`` whose managed ledgers ``mls`` (name -> ML) have
    their first (closed) ledger claim ``lastEntryId`` ``last`` in metadata; returns per name the ledger
    and the last entry it really holds."""
    shutil.copytree(root, copy)
    with pk.open_data_dir(root) as dd:
        held = {k: (lid, dd.ledgers[lid].last_entry_id) for k, ml in mls.items() for lid in dd.ml_ledgers(ml)[:1]}
    md = pk.metadata.MetadataStore(copy / "metadata")
    for lid, _ in held.values():
        lmd, _ = md.ledger_metadata(lid)
        assert lmd.state == LedgerMetadataFormat.CLOSED
        lmd.lastEntryId = last
        md.put_ledger_metadata(lid, lmd)
    md.close()
    for p in copy.rglob("LOCK"):
        p.unlink()
    return held


def assert_same_data(a: Any, b: Any) -> None:
    """Two opened data directories read the same: topics, ledgers, partitioned topics, schemas, messages,
    orphans, and the kinds of their issues (what only reading a ZooKeeper data directory reports aside)."""
    from pulsarkit.analysis.messages import read_messages
    from pulsarkit.analysis.orphans import find_orphans
    from pulsarkit.scan.records import topic_dict

    assert [topic_dict(t) for t in a.topics()] == [topic_dict(t) for t in b.topics()]
    assert a.ledgers_table().equals(b.ledgers_table())
    assert a.partitioned == b.partitioned and a.schemas == b.schemas
    assert list(read_messages(a)) == list(read_messages(b))
    assert [f.__dict__ for f in find_orphans(a)] == [f.__dict__ for f in find_orphans(b)]
    assert sorted(i.kind for i in a.issues if i.kind != "zookeeper_data") == sorted(i.kind for i in b.issues)
