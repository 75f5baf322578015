"""Dedup audit, time index and clock-skew report on Arrow (and the same on Spark)."""

import pulsarkit as pk
import pyarrow as pa
import pytest
from pulsarkit.analysis import audit


def entries_with_faults():
    rows = []
    entry = 0

    def add(producer, seq, n, publish, broker, highest=True):
        nonlocal entry
        if n == 1:
            raw = pk.encode_entry(pk.message_metadata(producer, seq, publish), b"x")
        else:
            md = pk.message_metadata(producer, seq, publish)
            if highest:
                md.highest_sequence_id = seq + n - 1
            else:
                md.highest_sequence_id = 0  # what the C++ client leaves
            raw = pk.encode_batch(md, [{"payload": b"x", "sequence_id": seq + i} for i in range(n)])
            if not highest:
                e = pk.Entry.parse(raw)
                md2 = e.metadata
                md2.ClearField("highest_sequence_id")
                raw = pk.encode_entry(md2, e.payload)
        raw = pk.add_broker_entry_metadata(raw, broker_timestamp=broker, index=entry)
        rows.append({"ledger_id": 7 + entry // 10, "entry_id": entry % 10, "entry": raw})
        entry += 1

    add("a", 0, 5, 1000, 1000)  # a: 0..4
    add("a", 5, 1, 1001, 1001)  # a: 5
    add("a", 3, 4, 1002, 1002)  # a: 3..6, duplicates 3..5 persisted
    add("a", 10, 1, 1003, 1003)  # a: gap 7..9
    add("b", 0, 3, 1004 + 7_200_000, 1004, highest=False)  # b: batch without highest id; clock 2 h ahead
    add("b", 3, 1, 1005 + 7_200_000, 1005)
    add("b", 3, 1, 1006 + 7_200_000, 1006)  # b: resend stored twice
    add("c", 0, 1, 1007, 1007)
    rows.append({"ledger_id": 9, "entry_id": 0, "entry": b"\x00\x00\x00\x09garbage"})
    return pa.Table.from_pylist(rows)


def test_dedup_audit_finds_duplicates_and_gaps():
    findings, summary = audit.dedup_audit(entries_with_faults())
    f = findings.to_pylist()
    kinds = [(r["producer_name"], r["kind"], r["first_sequence_id"], r["last_sequence_id"], r["messages"]) for r in f]
    assert kinds == [
        (None, "unreadable", None, None, None),
        ("a", "duplicate", 3, 5, 3),
        ("a", "gap", 7, 9, 3),
        ("b", "duplicate", 3, 3, 1),
    ]
    dup = f[1]
    assert (dup["ledger_id"], dup["entry_id"], dup["previous_ledger_id"], dup["previous_entry_id"]) == (
        7,
        2,
        7,
        1,
    )
    s = {r["producer_name"]: r for r in summary.to_pylist()}
    assert s["a"]["duplicate_messages"] == 3 and s["a"]["missing_messages"] == 3 and s["a"]["last_sequence_id"] == 10
    assert s["b"]["messages"] == 5 and s["b"]["last_sequence_id"] == 3  # the batch range came from num_messages
    assert s["c"]["duplicate_entries"] == 0 and s["c"]["gaps"] == 0
    assert "producer" in audit.render_audit(summary)


def test_time_index_and_clock_skew():
    t = entries_with_faults()
    per_entry, per_ledger = audit.time_index(t)
    assert per_entry.num_rows == t.num_rows
    assert per_entry.column("entry_timestamp").to_pylist()[:8] == [1000 + i for i in range(8)]
    led = {r["ledger_id"]: r for r in per_ledger.to_pylist()}
    assert (
        led[7]["entry_id_count"] == 8
        and led[7]["broker_timestamp_min"] == 1000
        and led[7]["publish_time_max"] == 1006 + 7_200_000
    )
    rep = audit.clock_skew_report(t, threshold_ms=60_000)
    assert rep["skewed_entries"] == 3
    assert [(r["producer_name"], r["skew_ms_count"]) for r in rep["by_producer"]] == [("b", 3)]
    assert rep["seek_disagreements"] > 0 and rep["examples"]


@pytest.mark.spark
def test_spark_audit_matches_arrow(spark):
    from pulsarkit.spark import audit as saudit

    t = entries_with_faults()
    df = spark.createDataFrame(t)
    findings, summary = saudit.dedup_audit(df)
    key = lambda r: (r["producer_name"] or "", r["kind"], r["first_sequence_id"] or -1)  # noqa: E731
    want_f, want_s = audit.dedup_audit(t)
    assert sorted(map(key, findings.collect())) == sorted(map(key, want_f.to_pylist()))
    by_name = lambda rows: sorted((dict(r) for r in rows), key=lambda r: r["producer_name"])  # noqa: E731
    assert by_name(r.asDict() for r in summary.collect()) == by_name(want_s.to_pylist())
    _, per_ledger = saudit.time_index(df)
    assert {r["ledger_id"]: r["entries"] for r in per_ledger.collect()} == {7: 8, 9: 1}
    assert saudit.clock_skew(df).count() == 3


def skewed_producers(n: int = 400, seed: int = 14) -> pa.Table:
    """Entries of four producers over five ledgers, in no particular order: ``fast`` publishes 2 h
    ahead of the broker, ``slow`` 5 min behind, ``jitter`` around the threshold, ``ok`` on time; some
    entries carry no broker timestamp (written before the broker recorded it), one is not an entry."""
    import random

    rng = random.Random(seed)
    offsets = {"fast": lambda: 7_200_000, "slow": lambda: -300_000, "jitter": lambda: rng.randint(-90_000, 90_000)}
    rows = []
    for i in range(n):
        producer = rng.choice(["fast", "slow", "jitter", "ok", "ok"])
        broker = 1_700_000_000_000 + i * 1000 + rng.randint(-1500, 1500)  # not monotone: seeks can disagree
        publish = broker + offsets.get(producer, lambda: rng.randint(-5, 5))()
        raw = pk.encode_entry(pk.message_metadata(producer, i, publish), b"x")
        if i % 37 != 5:
            raw = pk.add_broker_entry_metadata(raw, broker_timestamp=broker, index=i)
        rows.append({"ledger_id": 20 + i // 90, "entry_id": i % 90, "entry": raw})
    rows.append({"ledger_id": 25, "entry_id": 0, "entry": b"\x00\x00\x00\x09garbage"})
    rng.shuffle(rows)
    return pa.Table.from_pylist(rows)


def test_clock_skew_report_finds_skewed_producers():
    rep = audit.clock_skew_report(skewed_producers(), threshold_ms=60_000, max_seek_samples=50)
    by = {r["producer_name"]: r for r in rep["by_producer"]}
    assert by["fast"]["skew_ms_min"] == by["fast"]["skew_ms_max"] == 7_200_000
    assert by["slow"]["skew_ms_min"] == by["slow"]["skew_ms_max"] == -300_000
    assert 60_000 < abs(by["jitter"]["skew_ms_min"]) and "ok" not in by
    assert rep["skewed_entries"] == sum(r["skew_ms_count"] for r in rep["by_producer"])
    assert rep["entries"] == 401 and rep["with_broker_timestamp"] == 400 - len(range(5, 400, 37))
    # every 8th entry (401 // 50) is a target, unless it has no broker timestamp
    assert 40 < rep["seek_samples"] <= len(range(0, 401, 8)) and rep["seek_disagreements"] > 0
    assert len(rep["examples"]) == 10


@pytest.mark.spark
@pytest.mark.parametrize(
    "table, threshold_ms, samples",
    [
        (entries_with_faults(), 60_000, 1000),
        (entries_with_faults(), 0, 3),
        (skewed_producers(), 60_000, 1000),
        (skewed_producers(), 60_000, 25),
        (skewed_producers(n=60, seed=3), 1, 7),
    ],
)
@pytest.mark.parametrize("fetch", ["probed", "whole"])
def test_spark_clock_skew_report_is_the_single_process_report(spark, monkeypatch, table, threshold_ms, samples, fetch):
    from pulsarkit.spark import audit as saudit

    # these topics are small enough to be fetched whole; "probed" makes the seeks fetch round by round
    monkeypatch.setattr(saudit, "_FETCH_ALL_FACTOR", 0 if fetch == "probed" else 1)
    want = audit.clock_skew_report(table, threshold_ms=threshold_ms, max_seek_samples=samples)
    assert want["seek_samples"] and want["by_producer"]
    df = spark.createDataFrame(table).repartition(3)  # rows in no storage order, over several partitions
    assert saudit.clock_skew_report(df, threshold_ms, samples) == want


@pytest.mark.spark
def test_spark_clock_skew_report_without_broker_timestamps(spark):
    from pulsarkit.spark import audit as saudit

    t = pa.Table.from_pylist(
        [
            {"ledger_id": 1, "entry_id": e, "entry": pk.encode_entry(pk.message_metadata("p", e, 1000 + e), b"x")}
            for e in range(5)
        ]
    )
    want = audit.clock_skew_report(t)
    assert want["with_broker_timestamp"] == 0 and want["entries"] == 5
    assert saudit.clock_skew_report(spark.createDataFrame(t)) == want
