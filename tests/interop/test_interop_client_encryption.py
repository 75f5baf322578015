"""End-to-end encryption with the real Pulsar client (issue 21 item 9): entries the real producer encrypts
(RSA data-key encryption, AES-GCM payload, as the C++ client does it), stored by pulsarkit's broker, are never
presented as clear text: the codec raises or flags them, the data-directory reader flags them, and what it
flags is exactly what a real consumer without the key receives with ``ConsumerCryptoFailureAction.CONSUME``;
a real consumer holding the key decrypts what pulsarkit stored back to what was sent."""

from __future__ import annotations

import logging
import subprocess
from pathlib import Path

import pulsarkit as pk
import pytest
from conftest import require_module, require_tool
from pulsarkit.analysis.messages import messages_table
from pulsarkit.errors import EncryptedMessageError
from pulsarkit.testing.fake_broker import FakeBroker

pulsar = require_module("pulsar", "pip install pulsar-client")

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

CONTENTS = [f"secret-{i}-".encode() * (i + 1) for i in range(7)]
_client_log = logging.getLogger("pulsarkit.tests.pulsar-client")
_client_log.setLevel(logging.WARNING)


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> pulsar.CryptoKeyReader:
    openssl = require_tool("openssl", "the encryption interop test makes an RSA key pair")
    d = tmp_path_factory.mktemp("keys")
    priv, pub = d / "private.pem", d / "public.pem"
    subprocess.run([openssl, "genrsa", "-out", str(priv), "2048"], check=True, capture_output=True)
    subprocess.run([openssl, "rsa", "-in", str(priv), "-pubout", "-out", str(pub)], check=True, capture_output=True)
    return pulsar.CryptoKeyReader(str(pub), str(priv))


def _client(broker: FakeBroker) -> pulsar.Client:
    return pulsar.Client(broker.service_url, operation_timeout_seconds=10, logger=_client_log)


def _produce(broker: FakeBroker, keys, topic: str, batching: bool) -> None:
    c = _client(broker)
    try:
        p = c.create_producer(
            topic,
            encryption_key="app-key",
            crypto_key_reader=keys,
            compression_type=pulsar.CompressionType.LZ4,
            batching_enabled=batching,
            batching_max_messages=len(CONTENTS),
            batching_max_publish_delay_ms=60_000,
        )
        for m in CONTENTS:
            p.send_async(m, None)
        p.flush()
        p.close()
    finally:
        c.close()


def _consume(broker: FakeBroker, topic: str, n: int, **kw) -> list[bytes]:
    c = _client(broker)
    try:
        sub = c.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest, **kw)
        got = [sub.receive(5000).data() for _ in range(n)]
        with pytest.raises(pulsar.Timeout):
            sub.receive(300)
        sub.close()
        return got
    finally:
        c.close()


@pytest.mark.parametrize("batching", [False, True], ids=["single", "batched"])
def test_encrypted_entries_are_flagged_never_clear_text(keys, tmp_path: Path, batching: bool) -> None:
    topic = f"persistent://public/default/enc-{'b' if batching else 's'}"
    with FakeBroker(data_dir=str(tmp_path / "data")) as broker:
        _produce(broker, keys, topic, batching)
        stored = [data for _, data in broker.entries(topic)]
        assert len(stored) == (1 if batching else len(CONTENTS))
        flagged = []
        for data in stored:
            e = pk.Entry.parse(data)
            assert e.is_encrypted and [k.key for k in e.metadata.encryption_keys] == ["app-key"]
            with pytest.raises(EncryptedMessageError, match="app-key"):
                e.messages()
            (m,) = e.messages(ciphertext=True)  # a batch cannot be split without the key: one message
            assert m.encrypted and m.payload == e.payload
            assert not any(c in m.payload for c in CONTENTS)  # AES-GCM: nothing of the clear text shows
            flagged.append(m.payload)
        # A real consumer without the key, told to CONSUME: exactly the payloads pulsarkit flags.
        assert (
            _consume(broker, topic, len(stored), crypto_failure_action=pulsar.ConsumerCryptoFailureAction.CONSUME)
            == flagged
        )
        # A real consumer with the key: the clear text back, from what pulsarkit stored.
        assert _consume(broker, topic, len(CONTENTS), crypto_key_reader=keys) == CONTENTS
    # The data-directory reader: one row per stored entry, flagged, with no payload (the codec gives the
    # ciphertext to whoever asks for it); its position is the one the consumer above got.
    with pk.open_data_dir(tmp_path / "data") as dd:
        t = messages_table(dd, [topic])
        assert t.column("encrypted").to_pylist() == [True] * len(stored)
        assert t.column("payload").to_pylist() == [None] * len(stored)
        assert dd.issues == []
