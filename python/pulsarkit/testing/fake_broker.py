"""A small in-process Pulsar broker for tests: enough of the binary protocol for real clients to
produce to and consume from non-partitioned persistent topics.

It is built on pulsarkit's own frame codec (``FrameDecoder``, ``encode_command``, ``command``), so
every conversation with a real client is also a test of that codec. What it does, per command:

- CONNECT -> CONNECTED with ``min(own, client)`` protocol version and ``max_message_size``;
  PING/PONG both ways; PARTITIONED_METADATA -> 0 partitions; LOOKUP -> Connect to itself.
- PRODUCER -> PRODUCER_SUCCESS; SEND -> checksum check, then the publish hook, then SEND_RECEIPT
  (or SEND_ERROR). Every SEND is recorded as received (:attr:`FakeBroker.sends`).
- SUBSCRIBE/FLOW/ACK/REDELIVER/SEEK/GET_LAST_MESSAGE_ID/UNSUBSCRIBE/CLOSE_*: one cursor per
  subscription over the topic's stored entries; MESSAGE frames carry the stored bytes unchanged,
  except that broker entry metadata is stripped unless the client may see it (PIP-70 rule) and the
  checksum is dropped for clients older than protocol v11, as Pulsar's dispatcher does.
- GET_SCHEMA -> "no schema"; GET_OR_CREATE_SCHEMA -> version 0.

Not modelled: partitions, authentication, transactions, topic watchers, delayed delivery, Key_Shared
hashing (treated as Shared), Failover's active-consumer notifications (first consumer gets all).

The publish path is a hook, ``on_send(topic, send, headers_and_payload)``, returning
``(ledger_id, entry_id)`` or ``(ledger_id, entry_id, stored_bytes)``; raising (or returning)
:class:`BrokerError` rejects the message with SEND_ERROR. The default hook appends to an in-memory
list and can add broker entry metadata like Pulsar's two interceptors.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Self

from .. import proto
from ..codec.commands import FrameDecoder, command, encode_command
from ..codec.entry import Entry, add_broker_entry_metadata, strip_broker_entry_metadata
from ..errors import ChecksumMismatchError, PulsarkitError

log = logging.getLogger(__name__)

#: The newest protocol version pulsarkit's proto knows.
OWN_PROTOCOL_VERSION: int = max(proto.ProtocolVersion.values())
DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024
FRAME_PADDING = 10 * 1024
_LATEST = (2**63 - 1, 2**63 - 1)  # MessageId.latest as the Java/C++ clients encode it
_U64 = (1 << 64) - 1
_T = proto.CommandType
_TYPE_NAME = {v: k for k, v in _T.items()}


class BrokerError(Exception):
    """A ServerError the broker answers with (``error`` is a ServerError name or number)."""

    def __init__(self, error: str | int, message: str = "") -> None:
        self.code = proto.ServerError[error] if isinstance(error, str) else int(error)
        super().__init__(message or str(error))


SendResult = tuple[int, int] | tuple[int, int, bytes] | BrokerError
OnSend = Callable[[str, Any, bytes], SendResult]


@dataclass(frozen=True)
class StoredEntry:
    """One entry of a topic as the broker dispatches it (``data`` may carry broker entry metadata)."""

    ledger_id: int
    entry_id: int
    data: bytes
    num_messages: int = 1
    is_batch: bool = False
    timestamp: int = 0  # broker timestamp if present, else publish time (for seek by time)


@dataclass
class RecordedSend:
    """A SEND exactly as received; ``ledger_id``/``entry_id`` are None when it was rejected."""

    topic: str
    producer_id: int
    producer_name: str
    send: Any  # CommandSend
    headers_and_payload: bytes
    ledger_id: int | None = None
    entry_id: int | None = None
    error: BrokerError | None = None


@dataclass
class DispatchedMessage:
    """A MESSAGE frame the broker wrote: the command and the bytes that followed it."""

    topic: str
    subscription: str
    consumer_id: int
    message: Any  # CommandMessage
    data: bytes


@dataclass
class _Topic:
    name: str
    ledger_id: int
    entries: list[StoredEntry] = field(default_factory=list)
    subscriptions: dict[str, _Subscription] = field(default_factory=dict)
    next_index: int = -1  # AppendIndexMetadataInterceptor starts at -1
    positions: dict[tuple[int, int], int] = field(default_factory=dict)

    def append(self, e: StoredEntry) -> None:
        self.positions[(e.ledger_id, e.entry_id)] = len(self.entries)
        self.entries.append(e)

    def index_of(self, ledger_id: int, entry_id: int) -> int:
        """Position of the first entry at or after (ledger_id, entry_id)."""
        i = self.positions.get((ledger_id, entry_id))
        if i is not None:
            return i
        for i, e in enumerate(self.entries):
            if (e.ledger_id, e.entry_id) >= (ledger_id, entry_id):
                return i
        return len(self.entries)


@dataclass
class _Subscription:
    name: str
    topic: _Topic
    sub_type: int
    durable: bool
    read_pos: int = 0
    acked: set[int] = field(default_factory=set)
    consumers: list[_Consumer] = field(default_factory=list)
    redeliveries: dict[int, int] = field(default_factory=dict)
    redeliver_queue: list[int] = field(default_factory=list)
    rr: int = 0

    @property
    def mark_delete(self) -> int:
        """Index of the last entry of the acked prefix, -1 if none."""
        i = -1
        while i + 1 in self.acked:
            i += 1
        return i

    def rewind(self) -> None:
        self.read_pos = self.mark_delete + 1
        self.redeliver_queue.clear()


@dataclass(eq=False)
class _Consumer:
    conn: _Connection
    consumer_id: int
    sub: _Subscription
    name: str
    permits: int = 0
    epoch: int | None = None


class _Connection:
    def __init__(self, broker: FakeBroker, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.broker = broker
        self.reader = reader
        self.writer = writer
        self.decoder = FrameDecoder(broker.max_message_size + FRAME_PADDING)
        self.protocol_version = 0
        self.feature_flags: Any = None
        self.connected = False
        self.producers: dict[int, tuple[_Topic, str]] = {}
        self.consumers: dict[int, _Consumer] = {}
        self.closed = False

    # -- io ---------------------------------------------------------------------------------
    def send(self, cmd: Any, headers_and_payload: bytes | None = None) -> None:
        if self.closed:
            return
        self.writer.write(encode_command(cmd, headers_and_payload))

    def error(self, request_id: int, err: BrokerError) -> None:
        self.send(command("ERROR", request_id=request_id, error=err.code, message=str(err)))

    @property
    def exposes_broker_entry_metadata(self) -> bool:
        return bool(
            self.broker.expose_broker_entry_metadata
            and self.protocol_version >= 18
            and self.feature_flags is not None
            and self.feature_flags.supports_broker_entry_metadata
        )

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for c in list(self.consumers.values()):
            self.broker._remove_consumer(c)
        self.consumers.clear()
        self.writer.close()

    # -- dispatch ---------------------------------------------------------------------------
    def handle(self, cmd: Any, hp: bytes | None) -> None:
        t = cmd.type
        b = self.broker
        b.commands[_TYPE_NAME.get(t, str(t))] += 1
        if not self.connected and t != _T["CONNECT"]:
            raise PulsarkitError(f"{proto.COMMAND_FIELD.get(t, t)} before CONNECT")
        if t == _T["CONNECT"]:
            c = cmd.connect
            b.connects.append(_copy(c))
            self.protocol_version = c.protocol_version
            self.feature_flags = _copy(c.feature_flags) if c.HasField("feature_flags") else None
            self.connected = True
            self.send(
                command(
                    "CONNECTED",
                    server_version=b.server_version,
                    protocol_version=min(OWN_PROTOCOL_VERSION, c.protocol_version),
                    max_message_size=b.max_message_size,
                )
            )
        elif t == _T["PING"]:
            b.pings_received += 1
            self.send(command("PONG"))
        elif t == _T["PONG"]:
            b.pongs_received += 1
        elif t == _T["PARTITIONED_METADATA"]:
            r = cmd.partitionMetadata
            self.send(command("PARTITIONED_METADATA_RESPONSE", request_id=r.request_id, partitions=0, response=0))
        elif t == _T["LOOKUP"]:
            r = cmd.lookupTopic
            self.send(
                command(
                    "LOOKUP_RESPONSE",
                    request_id=r.request_id,
                    brokerServiceUrl=b.service_url,
                    response=1,  # Connect
                    authoritative=True,
                )
            )
        elif t == _T["PRODUCER"]:
            self._producer(cmd.producer)
        elif t == _T["SEND"]:
            self._send(cmd.send, hp or b"")
        elif t == _T["CLOSE_PRODUCER"]:
            r = cmd.close_producer
            self.producers.pop(r.producer_id, None)
            self.send(command("SUCCESS", request_id=r.request_id))
        elif t == _T["SUBSCRIBE"]:
            self._subscribe(cmd.subscribe)
        elif t == _T["FLOW"]:
            c = self.consumers.get(cmd.flow.consumer_id)
            if c is not None:
                c.permits += cmd.flow.messagePermits
                b._dispatch(c.sub)
        elif t == _T["ACK"]:
            self._ack(cmd.ack)
        elif t == _T["REDELIVER_UNACKNOWLEDGED_MESSAGES"]:
            self._redeliver(cmd.redeliverUnacknowledgedMessages)
        elif t == _T["SEEK"]:
            self._seek(cmd.seek)
        elif t == _T["GET_LAST_MESSAGE_ID"]:
            self._last_message_id(cmd.getLastMessageId)
        elif t == _T["UNSUBSCRIBE"]:
            r = cmd.unsubscribe
            c = self.consumers.pop(r.consumer_id, None)
            if c is None:
                self.error(r.request_id, BrokerError("ConsumerNotFound", f"no consumer {r.consumer_id}"))
                return
            b._remove_consumer(c)
            c.sub.topic.subscriptions.pop(c.sub.name, None)
            self.send(command("SUCCESS", request_id=r.request_id))
        elif t == _T["CLOSE_CONSUMER"]:
            r = cmd.close_consumer
            c = self.consumers.pop(r.consumer_id, None)
            if c is not None:
                b._remove_consumer(c)
            self.send(command("SUCCESS", request_id=r.request_id))
        elif t == _T["GET_SCHEMA"]:
            r = cmd.getSchema
            self.send(
                command(
                    "GET_SCHEMA_RESPONSE",
                    request_id=r.request_id,
                    error_code=proto.ServerError["TopicNotFound"],
                    error_message="Topic not found or no-schema",
                )
            )
        elif t == _T["GET_OR_CREATE_SCHEMA"]:
            r = cmd.getOrCreateSchema
            self.send(command("GET_OR_CREATE_SCHEMA_RESPONSE", request_id=r.request_id, schema_version=bytes(8)))
        else:
            b.unhandled.append(_copy(cmd))
            field_name = proto.COMMAND_FIELD.get(t)
            sub = getattr(cmd, field_name) if field_name else None
            if sub is not None and "request_id" in sub.DESCRIPTOR.fields_by_name:
                self.error(sub.request_id, BrokerError("NotAllowedError", f"fake broker does not handle command {t}"))

    def _producer(self, r: Any) -> None:
        b = self.broker
        topic = b._topic(r.topic)
        name = r.producer_name if r.HasField("producer_name") and r.producer_name else b._next_producer_name()
        self.producers[r.producer_id] = (topic, name)
        b.producers.append(_copy(r))
        self.send(
            command(
                "PRODUCER_SUCCESS",
                request_id=r.request_id,
                producer_name=name,
                last_sequence_id=b.last_sequence_id(topic.name, name) if b.last_sequence_id else -1,
            )
        )

    def _send_error(self, s: Any, err: BrokerError) -> None:
        self.send(
            command(
                "SEND_ERROR",
                producer_id=s.producer_id,
                sequence_id=s.sequence_id,
                error=err.code,
                message=str(err),
            )
        )

    def _send(self, s: Any, hp: bytes) -> None:
        b = self.broker
        if s.producer_id not in self.producers:
            # Pulsar closes the connection for a SEND on an unknown producer; an error is kinder here.
            self._send_error(s, BrokerError("ProducerBusy", f"unknown producer {s.producer_id}"))
            return
        topic, pname = self.producers[s.producer_id]
        rec = RecordedSend(topic.name, s.producer_id, pname, _copy(s), bytes(hp))
        b.sends.append(rec)
        try:
            Entry.parse(hp, verify_checksum=True)  # Producer.verifyChecksum, plus our own framing check
            result = b.on_send(topic.name, rec.send, rec.headers_and_payload)
            if isinstance(result, BrokerError):
                raise result
        except ChecksumMismatchError as e:
            result = BrokerError("ChecksumError", str(e))
        except PulsarkitError as e:
            result = BrokerError("MetadataError", str(e))
        except BrokerError as e:
            result = e
        if isinstance(result, BrokerError):
            rec.error = result
            self._send_error(s, result)
            return
        ledger_id, entry_id = result[0], result[1]
        stored = result[2] if len(result) > 2 else rec.headers_and_payload
        rec.ledger_id, rec.entry_id = ledger_id, entry_id
        # (-1, -1) is a deduplicated message (PIP-6): acknowledged, not stored again. The ids are
        # Java longs on the wire, so -1 travels as the all-ones uint64.
        if (ledger_id, entry_id) != (-1, -1):
            b._store(topic, ledger_id, entry_id, stored)
        receipt = command(
            "SEND_RECEIPT",
            producer_id=s.producer_id,
            sequence_id=s.sequence_id,
            message_id={"ledgerId": ledger_id & _U64, "entryId": entry_id & _U64},
        )
        if s.HasField("highest_sequence_id"):
            receipt.send_receipt.highest_sequence_id = s.highest_sequence_id
        self.send(receipt)
        for sub in list(topic.subscriptions.values()):
            b._dispatch(sub)

    def _subscribe(self, r: Any) -> None:
        b = self.broker
        topic = b._topic(r.topic)
        sub = topic.subscriptions.get(r.subscription)
        if sub is None:
            sub = _Subscription(r.subscription, topic, r.subType, r.durable)
            if r.HasField("start_message_id"):
                sub.read_pos = _start_position(topic, r.start_message_id)
            elif r.initialPosition == 0:  # Latest
                sub.read_pos = len(topic.entries)
            sub.acked.update(range(sub.read_pos))
            topic.subscriptions[sub.name] = sub
        elif r.consumer_id in self.consumers and self.consumers[r.consumer_id].sub is sub:
            self.send(command("SUCCESS", request_id=r.request_id))  # a retried SUBSCRIBE
            return
        elif sub.sub_type in (0,) and sub.consumers:
            self.error(
                r.request_id,
                BrokerError("ConsumerBusy", f"exclusive subscription {sub.name} already has a consumer"),
            )
            return
        c = _Consumer(
            self,
            r.consumer_id,
            sub,
            r.consumer_name,
            epoch=r.consumer_epoch if r.HasField("consumer_epoch") else None,
        )
        self.consumers[r.consumer_id] = c
        sub.consumers.append(c)
        b.subscribes.append(_copy(r))
        self.send(command("SUCCESS", request_id=r.request_id))

    def _ack(self, a: Any) -> None:
        b = self.broker
        b.acks.append(_copy(a))
        c = self.consumers.get(a.consumer_id)
        if c is not None:
            topic, sub = c.sub.topic, c.sub
            for mid in a.message_id:
                i = topic.positions.get((mid.ledgerId, mid.entryId))
                if i is None:
                    continue
                if a.ack_type == 1:  # Cumulative
                    sub.acked.update(range(i + 1))
                elif not any(mid.ack_set):  # a partial batch ack leaves the entry pending
                    sub.acked.add(i)
        if a.HasField("request_id"):
            self.send(command("ACK_RESPONSE", consumer_id=a.consumer_id, request_id=a.request_id))

    def _redeliver(self, r: Any) -> None:
        c = self.consumers.get(r.consumer_id)
        if c is None:
            return
        sub = c.sub
        self.broker.redelivery_requests.append(_copy(r))
        if not r.message_ids:
            sub.rewind()
        else:
            for mid in r.message_ids:
                i = sub.topic.positions.get((mid.ledgerId, mid.entryId))
                if i is not None and i not in sub.acked and i < sub.read_pos and i not in sub.redeliver_queue:
                    sub.redeliver_queue.append(i)
        self.broker._dispatch(sub)

    def _seek(self, r: Any) -> None:
        c = self.consumers.get(r.consumer_id)
        if c is None:
            self.error(r.request_id, BrokerError("ConsumerNotFound", f"no consumer {r.consumer_id}"))
            return
        sub, topic = c.sub, c.sub.topic
        if r.HasField("message_id"):
            pos = _start_position(topic, r.message_id, inclusive=True)
        elif r.HasField("message_publish_time"):
            # PersistentMessageFinder: reset to the entry after the newest one stamped before T
            pos = 0
            for i, e in enumerate(topic.entries):
                if e.timestamp < r.message_publish_time:
                    pos = i + 1
        else:
            self.error(r.request_id, BrokerError("MetadataError", "seek without a position"))
            return
        sub.acked = set(range(pos))
        sub.read_pos = pos
        sub.redeliver_queue.clear()
        self.send(command("SUCCESS", request_id=r.request_id))
        # Pulsar disconnects the subscription's consumers after a reset; they subscribe again.
        for other in list(sub.consumers):
            self.broker._remove_consumer(other)
            other.conn.consumers.pop(other.consumer_id, None)
            other.conn.send(command("CLOSE_CONSUMER", consumer_id=other.consumer_id, request_id=0))

    def _last_message_id(self, r: Any) -> None:
        c = self.consumers.get(r.consumer_id)
        if c is None:
            self.error(r.request_id, BrokerError("ConsumerNotFound", f"no consumer {r.consumer_id}"))
            return
        topic = c.sub.topic
        resp = command("GET_LAST_MESSAGE_ID_RESPONSE", request_id=r.request_id)
        last = resp.getLastMessageIdResponse.last_message_id
        if topic.entries:
            e = topic.entries[-1]
            last.ledgerId, last.entryId = e.ledger_id, e.entry_id
            if e.is_batch:
                last.batch_index = e.num_messages - 1
            md = c.sub.mark_delete
            mdp = resp.getLastMessageIdResponse.consumer_mark_delete_position
            if md >= 0:
                mdp.ledgerId, mdp.entryId = topic.entries[md].ledger_id, topic.entries[md].entry_id
            else:
                mdp.ledgerId, mdp.entryId = (
                    topic.entries[0].ledger_id,
                    (topic.entries[0].entry_id - 1) % 2**64,
                )  # (l, -1)
        else:
            # Pulsar answers (-1, -1) for an empty topic; the fields are uint64 on the wire.
            last.ledgerId = last.entryId = 2**64 - 1
        self.send(resp)


def _copy(msg: Any) -> Any:
    c = type(msg)()
    c.CopyFrom(msg)
    return c


def _start_position(topic: _Topic, mid: Any, inclusive: bool = False) -> int:
    """Where a cursor starts for a given message id: ``earliest`` -> 0, ``latest`` -> end; a batch
    message id starts at its entry (the client drops earlier batch indexes); otherwise the entry after
    it (or the entry itself for ``inclusive``, as Pulsar's seek does)."""
    lid, eid = mid.ledgerId, mid.entryId
    if (lid, eid) == _LATEST:
        return len(topic.entries)
    if lid >= 2**63:  # -1 as uint64: earliest
        return 0
    i = topic.index_of(lid, eid)
    exact = i < len(topic.entries) and (topic.entries[i].ledger_id, topic.entries[i].entry_id) == (lid, eid)
    if exact and not inclusive and mid.batch_index < 0:
        return i + 1
    return i


class FakeBroker:
    """An in-process Pulsar broker on 127.0.0.1 (ephemeral port). Use as a context manager::

        with FakeBroker() as broker:
            client = pulsar.Client(broker.service_url)
            ...
            broker.sends[0].headers_and_payload  # exactly what the producer sent

    ``expose_broker_entry_metadata`` is Pulsar's ``exposingBrokerEntryMetadataToClientEnabled``;
    ``broker_timestamp``/``index`` turn on the default store's two interceptors. State is only
    touched on the broker's event-loop thread; the record lists may be read from any thread.
    """

    def __init__(
        self,
        *,
        on_send: OnSend | None = None,
        last_sequence_id: Callable[[str, str], int] | None = None,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        expose_broker_entry_metadata: bool = False,
        broker_timestamp: bool = False,
        index: bool = False,
        server_version: str = "pulsarkit-fake-broker",
        ping_interval: float | None = None,
        clock: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self.on_send: OnSend = on_send or self._store_in_memory
        #: ``(topic, producer_name) -> int``: what PRODUCER_SUCCESS reports (the dedup state).
        self.last_sequence_id = last_sequence_id
        self.max_message_size = max_message_size
        self.expose_broker_entry_metadata = expose_broker_entry_metadata
        self.append_broker_timestamp = broker_timestamp
        self.append_index = index
        self.server_version = server_version
        self.ping_interval = ping_interval
        self.clock = clock
        self.host = "127.0.0.1"
        self.port = 0
        # What the clients sent and what the broker dispatched, in order.
        self.connects: list[Any] = []
        self.producers: list[Any] = []
        self.subscribes: list[Any] = []
        self.sends: list[RecordedSend] = []
        self.acks: list[Any] = []
        self.redelivery_requests: list[Any] = []
        self.dispatched: list[DispatchedMessage] = []
        self.unhandled: list[Any] = []
        #: How many commands of each type (``"LOOKUP"``, ``"SEEK"``, ...) clients sent.
        self.commands: Counter[str] = Counter()
        self.errors: list[str] = []
        self.pings_received = 0
        self.pongs_received = 0
        self._topics: dict[str, _Topic] = {}
        self._next_ledger = 1
        self._producer_seq = 0
        self._conns: set[_Connection] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.AbstractServer | None = None

    # -- lifecycle --------------------------------------------------------------------------
    @property
    def service_url(self) -> str:
        return f"pulsar://{self.host}:{self.port}"

    def start(self) -> FakeBroker:
        if self._loop is not None:
            raise RuntimeError("FakeBroker already started")
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=loop.run_forever, name="pulsarkit-fake-broker", daemon=True)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), loop).result(timeout=10)
        return self

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, 0)
        self.port = self._server.sockets[0].getsockname()[1]
        if self.ping_interval:
            self._spawn(self._keepalive())

    def stop(self, timeout: float = 10) -> None:
        """Closes the listener and every connection, then ends the event-loop thread."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return

        async def shutdown() -> None:
            assert self._server is not None
            self._server.close()
            for c in list(self._conns):
                c.close()
            for t in list(self._tasks):
                t.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

        try:
            asyncio.run_coroutine_threadsafe(shutdown(), loop).result(timeout=timeout)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            assert self._thread is not None
            self._thread.join(timeout)
            if not self._thread.is_alive():
                loop.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _call(self, fn: Callable[[], Any], timeout: float = 10) -> Any:
        """Runs ``fn`` on the broker's thread (or inline before start) and returns its result."""
        if self._loop is None or not self._thread or threading.current_thread() is self._thread:
            return fn()

        async def run() -> Any:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout=timeout)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        conn = _Connection(self, reader, writer)
        self._conns.add(conn)
        try:
            while not conn.closed:
                data = await reader.read(1 << 16)
                if not data:
                    break
                for cmd, hp in conn.decoder.feed(data):
                    conn.handle(cmd, hp)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        except Exception as e:  # a protocol violation or a broker bug: record it, drop the connection
            self.errors.append(f"{type(e).__name__}: {e}")
            log.warning("fake broker closes a connection: %s", e, exc_info=True)
        finally:
            conn.close()
            self._conns.discard(conn)
            if task is not None:
                self._tasks.discard(task)

    async def _keepalive(self) -> None:
        assert self.ping_interval
        while True:
            await asyncio.sleep(self.ping_interval)
            self._ping_all()

    def _ping_all(self) -> int:
        n = 0
        for c in list(self._conns):
            if c.connected and not c.closed:
                c.send(command("PING"))
                n += 1
        return n

    # -- public helpers -----------------------------------------------------------------------
    def ping_clients(self) -> int:
        """Sends PING on every connection (as the broker's keep-alive does); returns how many."""
        return self._call(self._ping_all)

    def preload(self, topic: str, entries: Iterable[bytes]) -> list[tuple[int, int]]:
        """Appends stored entry bytes (as a bookie holds them) to a topic; returns their ids.
        Waiting consumers are served at once."""
        datas = [bytes(e) for e in entries]

        def run() -> list[tuple[int, int]]:
            t = self._topic(topic)
            ids = []
            for d in datas:
                eid = t.entries[-1].entry_id + 1 if t.entries else 0
                self._store(t, t.ledger_id, eid, d)
                ids.append((t.ledger_id, eid))
            for sub in list(t.subscriptions.values()):
                self._dispatch(sub)
            return ids

        return self._call(run)

    def entries(self, topic: str) -> list[StoredEntry]:
        """The stored entries of a topic (empty if it does not exist)."""
        return self._call(lambda: list(t.entries) if (t := self._topics.get(_full_name(topic))) else [])

    def sends_for(self, topic: str) -> list[RecordedSend]:
        name = _full_name(topic)
        return [s for s in list(self.sends) if s.topic == name]

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 10, what: str = "condition") -> None:
        """Polls ``predicate`` until it holds; raises TimeoutError after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise TimeoutError(f"fake broker: timed out waiting for {what}")
            time.sleep(0.01)

    # -- topic state (event-loop thread) ------------------------------------------------------
    def _topic(self, name: str) -> _Topic:
        full = _full_name(name)
        t = self._topics.get(full)
        if t is None:
            t = _Topic(full, self._next_ledger)
            self._next_ledger += 1
            self._topics[full] = t
        return t

    def _next_producer_name(self) -> str:
        self._producer_seq += 1
        return f"fake-broker-{self._producer_seq}"

    def _store_in_memory(self, topic: str, send: Any, headers_and_payload: bytes) -> SendResult:
        """The default publish hook: next entry id in the topic's ledger, plus broker entry metadata
        from the enabled interceptors (index = cumulative 0-based index of the entry's last message)."""
        t = self._topic(topic)
        eid = t.entries[-1].entry_id + 1 if t.entries else 0
        data = headers_and_payload
        if self.append_broker_timestamp or self.append_index:
            ts = self.clock() if self.append_broker_timestamp else None
            idx = None
            if self.append_index and send.num_messages > 0:
                t.next_index += send.num_messages
                idx = t.next_index
            data = add_broker_entry_metadata(data, broker_timestamp=ts, index=idx)
        return (t.ledger_id, eid, data)

    def _store(self, t: _Topic, ledger_id: int, entry_id: int, data: bytes) -> None:
        n, is_batch, ts = 1, False, 0
        try:
            e = Entry.parse(data, verify_checksum=False)
            n, is_batch, ts = e.num_messages, e.is_batch, e.entry_timestamp
        except PulsarkitError:
            pass  # dispatched as is: the consumer decides what a broken entry is
        t.append(StoredEntry(ledger_id, entry_id, data, n, is_batch, ts))

    def _remove_consumer(self, c: _Consumer) -> None:
        sub = c.sub
        if c in sub.consumers:
            sub.consumers.remove(c)
            if not sub.consumers:
                if not sub.durable:
                    sub.topic.subscriptions.pop(sub.name, None)
                else:
                    sub.rewind()  # unacked messages go to the next consumer

    def _dispatch(self, sub: _Subscription) -> None:
        """Pushes entries while some consumer has permits (permits count messages, not entries)."""
        topic = sub.topic
        while sub.consumers:
            if sub.redeliver_queue:
                i, redelivery = sub.redeliver_queue[0], True
            else:
                while sub.read_pos < len(topic.entries) and sub.read_pos in sub.acked:
                    sub.read_pos += 1
                if sub.read_pos >= len(topic.entries):
                    return
                i, redelivery = sub.read_pos, False
            c = self._pick_consumer(sub)
            if c is None:
                return
            if redelivery:
                sub.redeliver_queue.pop(0)
            else:
                sub.read_pos += 1
            e = topic.entries[i]
            count = sub.redeliveries.get(i, 0)  # deliveries so far = this one's redelivery_count
            self._push(c, e, count)
            sub.redeliveries[i] = count + 1
            c.permits -= e.num_messages

    def _pick_consumer(self, sub: _Subscription) -> _Consumer | None:
        cs = sub.consumers if sub.sub_type in (1, 3) else sub.consumers[:1]
        for k in range(len(cs)):
            c = cs[(sub.rr + k) % len(cs)]
            if c.permits > 0 and not c.conn.closed:
                sub.rr = (sub.rr + k + 1) % len(cs)
                return c
        return None

    def _push(self, c: _Consumer, e: StoredEntry, redelivery_count: int) -> None:
        data = e.data
        if not c.conn.exposes_broker_entry_metadata:
            try:
                data = strip_broker_entry_metadata(data)
            except PulsarkitError:
                pass  # a broken BEM header goes out as stored, as Pulsar would
        if c.conn.protocol_version < 11 and data[:2] == b"\x0e\x01":
            data = data[6:]
        cmd = command(
            "MESSAGE",
            consumer_id=c.consumer_id,
            message_id={"ledgerId": e.ledger_id, "entryId": e.entry_id},
            redelivery_count=redelivery_count,
        )
        if c.epoch is not None:
            cmd.message.consumer_epoch = c.epoch
        self.dispatched.append(DispatchedMessage(c.sub.topic.name, c.sub.name, c.consumer_id, _copy(cmd.message), data))
        c.conn.send(cmd, data)


def _full_name(topic: str) -> str:
    if "://" in topic:
        return topic
    parts = topic.split("/")
    if len(parts) == 1:
        return f"persistent://public/default/{topic}"
    return f"persistent://{topic}"
