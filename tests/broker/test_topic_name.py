"""Topic names and managed-ledger names as Pulsar's ``TopicName`` forms them, v2 and the legacy v1
(``persistent://tenant/cluster/namespace/topic``), and the ``/managed-ledgers`` tree sorted out by them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pulsarkit.broker.topic_name import (
    TopicName,
    encode_local,
    is_system_topic,
    ml_paths,
    ml_to_topic,
    partition_of,
    topic_to_ml,
)
from pulsarkit.errors import InvalidTopicNameError, PulsarkitError


def test_v2_and_v1_names_and_their_managed_ledger_names():
    v2 = TopicName.parse("persistent://t/ns/x")
    assert (v2.tenant, v2.cluster, v2.namespace, v2.local, v2.is_v2) == ("t", None, "ns", "x", True)
    assert v2.ml_name == "t/ns/persistent/x"
    v1 = TopicName.parse("persistent://prop/us-west/ns/legacy-topic")
    assert (v1.tenant, v1.cluster, v1.namespace, v1.local, v1.is_v2) == ("prop", "us-west", "ns", "legacy-topic", False)
    assert v1.ml_name == "prop/us-west/ns/persistent/legacy-topic"
    assert v1.namespace_name == "prop/us-west/ns"
    assert ml_to_topic("prop/us-west/ns/persistent/legacy-topic") == "persistent://prop/us-west/ns/legacy-topic"
    assert topic_to_ml("persistent://prop/us-west/ns/legacy-topic") == "prop/us-west/ns/persistent/legacy-topic"
    # a v1 local name may hold '/' (the split stops at four parts); it is encoded in the ledger's name
    assert topic_to_ml("non-persistent://t/c/ns/a/b") == "t/c/ns/non-persistent/a%2Fb"
    assert ml_to_topic("t/c/ns/non-persistent/a%2Fb") == "non-persistent://t/c/ns/a/b"
    # short names, and the domain's case ignored as TopicDomain.getEnum does
    assert topic_to_ml("x") == "public/default/persistent/x"
    assert topic_to_ml("t/ns/x") == "t/ns/persistent/x"
    assert TopicName.parse("PERSISTENT://t/ns/x").full == "persistent://t/ns/x"
    # URLEncoder's rules: '*' kept, '~' and ' ' escaped
    assert encode_local("a*b~c d") == "a*b%7Ec+d"


@pytest.mark.parametrize(
    "name",
    [
        "persistent://t/x",  # two parts
        "persistent://t/ns/",  # empty local name
        "persistent://t//ns/x",  # empty cluster
        "persistent://t w/ns/x",  # a tenant with a space
        "persistent://t/ns!/x",
        "queue://t/ns/x",
        "t/x",  # short: one or three parts only
        "a/b/c/d",
    ],
)
def test_names_pulsar_refuses_are_refused_typed(name):
    with pytest.raises(InvalidTopicNameError) as e:
        TopicName.parse(name)
    assert isinstance(e.value, PulsarkitError)


@pytest.mark.parametrize(
    "ml", ["t/ns/x", "a/b/c/d/e/f", "t/ns/queue/x", "t/ns/persistent/", "t/ns/persistent/a%2Fb", "t/n s/persistent/x"]
)
def test_managed_ledger_names_of_no_topic_are_refused_and_kept_by_ml_to_topic(ml):
    with pytest.raises(InvalidTopicNameError):
        TopicName.from_ml(ml)
    assert ml_to_topic(ml) == ml  # the managed-ledger layer allows free names


def test_partition_index_as_getPartitionIndex_reads_it():
    assert partition_of("persistent://t/c/ns/x-partition-3") == ("persistent://t/c/ns/x", 3)
    assert partition_of("x-partition-10") == ("x", 10)
    for name in ("x-partition-01", "x-partition--1", "x-partition-+1", "x-partition-2147483648", "x-partition-"):
        assert partition_of(name) == (None, -1), name
    assert is_system_topic("persistent://t/c/ns/__change_events")
    assert is_system_topic("persistent://pulsar/system/__transaction_log_0")
    assert not is_system_topic("persistent://t/c/ns/a/__b")  # a v1 local name 'a/__b'


_named = st.text(alphabet="abcXYZ019_-=:.", min_size=1, max_size=8)
_local = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12)


@st.composite
def topic_names(draw):
    v1 = draw(st.booleans())
    local = draw(_local if v1 else _local.filter(lambda s: "/" not in s))
    return TopicName(
        draw(st.sampled_from(["persistent", "non-persistent"])),
        draw(_named),
        draw(_named) if v1 else None,
        draw(_named),
        local,
    )


@given(topic_names())
def test_topic_name_round_trips_through_its_full_and_managed_ledger_names(tn):
    assert TopicName.parse(tn.full) == tn
    assert TopicName.from_ml(tn.ml_name) == tn
    assert tn.ml_name.count("/") == (3 if tn.is_v2 else 4)
    assert topic_to_ml(ml_to_topic(tn.ml_name)) == tn.ml_name


def test_ml_paths_sorts_out_v1_and_v2_managed_ledgers_cursors_parents_and_the_rest():
    nodes = {
        # ZooKeeper's empty parents
        "t": b"",
        "t/ns": b"",
        "t/ns/persistent": b"",
        "p": b"",
        "p/c": b"",
        "p/c/ns": b"",
        "p/c/ns/persistent": b"",
        "t/ns/persistent/x": b"info",
        "t/ns/persistent/x/sub": b"cursor",
        "p/c/ns/persistent/y": b"info",
        "p/c/ns/persistent/y/sub": b"cursor",
        # a v1 namespace named like a domain: its parent is empty, so no v2 topic's cursor
        "p/c/persistent": b"",
        "p/c/persistent/persistent": b"",
        "p/c/persistent/persistent/z": b"info",
        # a v2 topic named like a domain, with a cursor
        "t/ns/persistent/persistent": b"info",
        "t/ns/persistent/persistent/s": b"cursor",
        # nothing Pulsar names
        "t/ns/persistent/x/sub/deeper": b"?",
        "t w/ns/persistent/q": b"info",
        "t w/ns/persistent": b"",
    }
    mls, cursors, odd = ml_paths(nodes)
    assert sorted(mls) == [
        "p/c/ns/persistent/y",
        "p/c/persistent/persistent/z",
        "t/ns/persistent/persistent",
        "t/ns/persistent/x",
    ]
    assert cursors == {
        "t/ns/persistent/x/sub": ("t/ns/persistent/x", "sub"),
        "p/c/ns/persistent/y/sub": ("p/c/ns/persistent/y", "sub"),
        "t/ns/persistent/persistent/s": ("t/ns/persistent/persistent", "s"),
    }
    assert odd == ["t w/ns/persistent/q", "t/ns/persistent/x/sub/deeper"]
