"""The only writes pulsarkit sends to a live ZooKeeper (an orphan cleanup's compare-and-delete, a backup's
re-creation): byte-equal to kazoo's encoding of the same requests (an independent implementation); a create is
always persistent (flags 0). Against the real server: tests/interop/test_interop_zk_live.py."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pulsarkit.errors import MetadataStoreError
from pulsarkit.metadata import zookeeper_write as zw
from pulsarkit.metadata.zookeeper import Acl

try:
    import kazoo.protocol.serialization as kz
    from kazoo.security import ACL, Id
except ImportError:  # pragma: no cover - depends on the environment
    kz = None

_I = struct.Struct(">i")
paths = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40).map(lambda s: "/" + s)


@pytest.mark.skipif(kz is None, reason="kazoo (scripts/requirements-test.txt) is the independent encoder")
@given(xid=st.integers(1, 2**31 - 1), path=paths, version=st.integers(-1, 2**31 - 1))
def test_delete_equals_kazoos(xid: int, path: str, version: int) -> None:
    body = struct.pack(">ii", xid, kz.Delete.type) + bytes(kz.Delete(path, version).serialize())
    assert zw.encode_delete(xid, path, version) == _I.pack(len(body)) + body


@pytest.mark.skipif(kz is None, reason="kazoo (scripts/requirements-test.txt) is the independent encoder")
@given(
    xid=st.integers(1, 2**31 - 1),
    path=paths,
    data=st.binary(max_size=200),
    # (an empty id is left out: kazoo writes "" as a null string, -1, where Java's jute writes length 0)
    acl=st.lists(
        st.tuples(st.integers(0, 31), st.sampled_from(["world", "digest", "ip"]), st.text(min_size=1, max_size=9)),
        max_size=3,
    ),
)
def test_create_equals_kazoos_and_is_persistent(xid: int, path: str, data: bytes, acl: list) -> None:
    ours = zw.encode_create(xid, path, data, [Acl(p, s, i) for p, s, i in acl])
    theirs = kz.Create(path, data, [ACL(p, Id(s, i)) for p, s, i in acl], 0).serialize()
    body = struct.pack(">ii", xid, kz.Create.type) + bytes(theirs)
    assert ours == _I.pack(len(body)) + body
    assert ours[-4:] == b"\x00\x00\x00\x00"  # flags: persistent, never ephemeral or sequential
    assert zw.encode_create(xid, path, data)[-31:-4] == _I.pack(1) + b"".join(
        (_I.pack(31), _I.pack(5), b"world", _I.pack(6), b"anyone")
    )


def test_only_zookeeper_urls() -> None:
    with pytest.raises(MetadataStoreError, match="not a ZooKeeper URL"):
        zw.ZkNodeWriter("rocksdb:/tmp/x")
    with pytest.raises(MetadataStoreError, match="etcd"):
        zw.ZkNodeWriter("etcd:127.0.0.1:2379")
