"""The entry predicates the scan's per-entry rules use: marker, chunk, encryption, transaction id."""

from pulsarkit.codec.entry import Entry, encode_entry, message_metadata


def _entry(**fields):
    return Entry.parse(encode_entry(message_metadata("p", 1, 1000, **fields), b"x"))


def test_a_plain_message_is_none_of_them():
    e = _entry()
    assert (e.is_marker, e.marker, e.is_chunk, e.is_encrypted, e.txn_id) == (False, None, False, False, None)


def test_markers_chunks_encryption_and_transactions():
    commit = _entry(marker_type=21, txnid_most_bits=0, txnid_least_bits=0)
    assert commit.is_marker and commit.marker == "TXN_COMMIT" and commit.txn_id == (0, 0)
    assert _entry(marker_type=13).marker == "REPLICATED_SUBSCRIPTION_UPDATE"
    assert _entry(marker_type=99).marker == "99"
    # a marker_type of 0 stored explicitly is a marker too: the dispatcher drops any entry with the field
    assert _entry(marker_type=0).is_marker
    chunk = _entry(uuid="u-1", num_chunks_from_msg=3, chunk_id=0, total_chunk_msg_size=3)
    assert chunk.is_chunk and not chunk.is_marker
    # one chunk only is a whole message
    assert not _entry(uuid="u-2", num_chunks_from_msg=1, chunk_id=0, total_chunk_msg_size=1).is_chunk
    assert _entry(txnid_least_bits=5).txn_id == (0, 5)
    md = message_metadata("p", 1, 1000)
    md.encryption_keys.add(key="k", value=b"v")
    assert Entry.parse(encode_entry(md, b"x")).is_encrypted
