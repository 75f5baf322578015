"""End to end with the real client: a pulsar-client producer sends through the fake broker into
PersistentTopic.publish (dedup + PIP-70 interceptors + managed ledger); a resend gets a -1:-1
receipt, and a real consumer receives each message once, with the broker's index on the wire."""

import pulsarkit as pk
import pytest
from pulsarkit.broker import INDEX_INTERCEPTOR, PersistentTopic
from pulsarkit.managed_ledger import Store
from pulsarkit.testing.fake_broker import FakeBroker

pulsar = pytest.importorskip("pulsar", reason="pulsar-client is not installed (pip install pulsar-client)")

pytestmark = pytest.mark.interop
TOPIC = "persistent://public/default/dedup-e2e"


@pytest.mark.timeout(90)
def test_resend_gets_duplicate_receipt_and_consumer_sees_each_message_once(tmp_path):
    with FakeBroker(
        broker_timestamp=True,
        index=True,
        deduplication=True,
        expose_broker_entry_metadata=True,
        data_dir=str(tmp_path / "data"),
    ) as broker:
        client = pulsar.Client(broker.service_url, operation_timeout_seconds=10)
        try:
            producer = client.create_producer(TOPIC, producer_name="e2e-producer", batching_enabled=False)
            ids = [producer.send(b"msg-%d" % i, sequence_id=i) for i in range(10)]
            assert [(m.ledger_id(), m.entry_id()) for m in ids] == [(ids[0].ledger_id(), i) for i in range(10)]
            producer.close()
            # The application restarts and resends the last messages it is unsure about.
            producer = client.create_producer(TOPIC, producer_name="e2e-producer", batching_enabled=False)
            assert producer.last_sequence_id() == 9  # PRODUCER_SUCCESS carries the dedup state
            dup = producer.send(b"msg-8", sequence_id=8)
            assert (dup.ledger_id(), dup.entry_id()) == (-1, -1)
            new = producer.send(b"msg-10", sequence_id=10)
            assert new.entry_id() == 10
            producer.close()
            assert [s.ledger_id for s in broker.sends].count(-1) == 1

            consumer = client.subscribe(TOPIC, "sub", initial_position=pulsar.InitialPosition.Earliest)
            got = []
            for _ in range(11):
                m = consumer.receive(timeout_millis=10_000)
                got.append(m.data())
                consumer.acknowledge(m)
            with pytest.raises(Exception):
                consumer.receive(timeout_millis=300)
            assert got == [b"msg-%d" % i for i in range(11)]
            # The client asked for broker entry metadata (v18+ and the feature flag), exposing is on:
            # every MESSAGE carried the stored bytes, with the broker's continuous index.
            assert broker.connects[-1].feature_flags.supports_broker_entry_metadata
            indexes = [pk.peek_broker_entry_metadata(d.data).index for d in broker.dispatched]
            assert indexes == list(range(11))
            assert broker.topic(TOPIC).last_sequence_id("e2e-producer") == 10
        finally:
            client.close()
    # What the broker stored is a real managed ledger: reopened from its directory, the topic
    # recovers the producer's dedup state and the index, holds each message once, and the durable
    # subscription's cursor is there.
    with Store.open(tmp_path / "data", sync=False) as store:
        t2 = PersistentTopic(
            store.managed_ledger("public/default/persistent/dedup-e2e"),
            interceptors=[INDEX_INTERCEPTOR],
            deduplication=True,
        )
        assert t2.last_sequence_id("e2e-producer") == 10 and t2.index == 10
        stored = t2.ml.read(t2.ml.first_position, 100)
        assert [pk.Entry.parse(d).messages()[0].payload for _, d in stored] == [b"msg-%d" % i for i in range(11)]
        assert [pk.peek_broker_entry_metadata(d).index for _, d in stored] == list(range(11))
        assert "sub" in [c.name for c in t2.ml.cursors()]
        t2.close()
