"""The compacted-topic oracle and its pytest fixture (``pulsarkit.testing.compaction``)."""

from __future__ import annotations

from pulsarkit.testing.compaction import CompactedTopicOracle


def test_the_fixture_answers_for_a_topic_built_in_the_test(compacted_topic_oracle):
    t = compacted_topic_oracle
    b = t.send_batch([("a", b"1"), ("b", b"2"), ("a", b"3"), ("c", b"")])
    p = t.send("b", b"4")
    assert t.has_message_available() and t.expected_last_message_id() == (p.ledger_id, p.entry_id, -1)
    t.compact()
    got = [(m.message_id, m.key, m.payload) for m in t.expected_messages()]
    assert got == [((b.ledger_id, b.entry_id, 2), "a", b"3"), ((p.ledger_id, p.entry_id, -1), "b", b"4")]
    assert t.has_message_available((b.ledger_id, b.entry_id, 2))
    assert not t.has_message_available((p.ledger_id, p.entry_id, -1))


def test_an_all_tombstone_topic_has_nothing_to_read():
    with CompactedTopicOracle(compression="ZSTD") as t:
        t.send("a", b"1")
        t.send_batch([("a", b""), (None, b"keyless")])
        t.compact()
        assert t.expected_messages() == [] and t.expected_last_message_id() is None
        assert not t.has_message_available()
