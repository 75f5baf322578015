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

Storage and the broker's rules are pulsarkit's own, not a copy: each topic is a
:class:`~pulsarkit.broker.PersistentTopic` over a managed ledger of a store in a private temporary
directory (or ``data_dir``), so SEND goes through its publish path (checksum, PIP-6 deduplication,
PIP-70 interceptors, the managed ledger), MESSAGE frames carry what its dispatch rule gives each
client, seek by time uses its finder, and a durable subscription's acknowledgements move a
:class:`~pulsarkit.managed_ledger.ManagedCursor`. The fake broker keeps only the protocol: frames,
producers, consumers, permits and redelivery. ``on_send(topic, send, headers_and_payload)`` is a
fault-injection hook called before the publish: raising or returning :class:`BrokerError` rejects
the message with SEND_ERROR, anything else lets it through.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any, Self

from ..broker.compaction import CompactedTopic, CompactionOptions, Compactor
from ..broker.interceptors import INDEX_INTERCEPTOR, TIMESTAMP_INTERCEPTOR
from ..broker.topic import PersistentTopic
from ..broker.topic_name import topic_to_ml
from ..codec.commands import command
from ..codec.entry import Entry
from ..errors import PulsarkitError
from ..managed_ledger import ManagedLedgerConfig, Position, Store
from .connection import _Connection
from .state import (
    DispatchedMessage,
    OnSend,
    RecordedSend,
    _Consumer,
    _copy,
    _EntryRef,
    _Subscription,
    _Topic,
)

log = logging.getLogger(__name__)

DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024


class FakeBroker:
    """An in-process Pulsar broker on 127.0.0.1 (ephemeral port). Use as a context manager::

        with FakeBroker() as broker:
            client = pulsar.Client(broker.service_url)
            ...
            broker.sends[0].headers_and_payload  # exactly what the producer sent

    ``expose_broker_entry_metadata`` is Pulsar's ``exposingBrokerEntryMetadataToClientEnabled``;
    ``broker_timestamp``/``index`` turn on the two PIP-70 interceptors (``brokerEntryMetadataInterceptors``)
    and ``deduplication`` PIP-6, for every topic. The topics live in a store under ``data_dir`` (the
    caller's, kept) or a private temporary directory removed by :meth:`stop`. State is only touched on
    the broker's event-loop thread; the record lists may be read from any thread.
    """

    def __init__(
        self,
        *,
        on_send: OnSend | None = None,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        expose_broker_entry_metadata: bool = False,
        broker_timestamp: bool = False,
        index: bool = False,
        deduplication: bool = False,
        data_dir: str | None = None,
        server_version: str = "pulsarkit-fake-broker",
        ping_interval: float | None = None,
        clock: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self.on_send: OnSend | None = on_send
        self.max_message_size = max_message_size
        self.expose_broker_entry_metadata = expose_broker_entry_metadata
        self.interceptors = [
            n for n, on in ((TIMESTAMP_INTERCEPTOR, broker_timestamp), (INDEX_INTERCEPTOR, index)) if on
        ]
        self.deduplication = deduplication
        self._own_dir = data_dir is None
        self.data_dir = tempfile.mkdtemp(prefix="pulsarkit-fake-broker-") if data_dir is None else data_dir
        #: The managed-ledger factory every topic is stored in.
        self.store = Store.open(self.data_dir, sync=False)  # `clock` is the broker's, for its interceptors
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

    def start(self) -> Self:
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
            self._close_store()
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
            self._close_store()

    def _close_store(self) -> None:
        for t in self._topics.values():
            t.persistent.close()
        self.store.close()
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

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
        """Appends stored entry bytes (as a bookie holds them, broker entry metadata included) to a
        topic's managed ledger, bypassing the publish path; returns their ids. Waiting consumers are
        served at once."""
        datas = [bytes(e) for e in entries]

        def run() -> list[tuple[int, int]]:
            t = self._topic(topic)
            ids: list[tuple[int, int]] = []
            for d in datas:
                pos = t.persistent.ml.add_entry(d, num_messages=0)  # 0: no interceptor touches it
                self._stored(t, pos)
                ids.append((pos.ledger_id, pos.entry_id))
            for sub in list(t.subscriptions.values()):
                self._dispatch(sub)
            return ids

        return self._call(run)

    def entries(self, topic: str) -> list[tuple[Position, bytes]]:
        """The stored entries of a topic, read back from its managed ledger (empty if none)."""

        def run() -> list[tuple[Position, bytes]]:
            t = self._topics.get(_full_name(topic))
            return [] if t is None else [(e.position, t.persistent.ml.read_entry(e.position)) for e in t.entries]

        return self._call(run)

    def topic(self, name: str) -> PersistentTopic:
        """The broker's ``PersistentTopic`` for a topic (created if needed)."""
        return self._call(lambda: self._topic(name).persistent)

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
            ml = self.store.managed_ledger(topic_to_ml(full), ManagedLedgerConfig(minimum_rollover_time_ms=0))
            persistent = PersistentTopic(
                ml,
                interceptors=self.interceptors,
                deduplication=self.deduplication,
                exposing_broker_entry_metadata_to_client=self.expose_broker_entry_metadata,
                clock=self.clock,
            )
            t = _Topic(full, persistent)
            self._topics[full] = t
        return t

    def _next_producer_name(self) -> str:
        self._producer_seq += 1
        return f"fake-broker-{self._producer_seq}"

    def _stored(self, t: _Topic, pos: Position) -> None:
        """Indexes an entry the managed ledger now holds, for dispatch (permits count messages)."""
        n, is_batch = 1, False
        try:
            e = Entry.parse(t.persistent.ml.read_entry(pos), verify_checksum=False)
            n, is_batch = e.num_messages, e.is_batch
        except PulsarkitError:
            pass  # dispatched as is: the consumer decides what a broken entry is
        t.append(_EntryRef(pos, n, is_batch))

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
            count = sub.redeliveries.get(i, 0)  # deliveries so far = this one's redelivery_count
            self._push(c, topic, i, count)
            sub.redeliveries[i] = count + 1
            c.permits -= topic.entries[i].num_messages

    def _pick_consumer(self, sub: _Subscription) -> _Consumer | None:
        cs = sub.consumers if sub.sub_type in (1, 3) else sub.consumers[:1]
        for k in range(len(cs)):
            c = cs[(sub.rr + k) % len(cs)]
            if c.permits > 0 and not c.conn.closed:
                sub.rr = (sub.rr + k + 1) % len(cs)
                return c
        return None

    def compact(self, topic: str, **options: Any) -> Any:
        """Compacts ``topic`` now, as the broker's compactor does (``retain_null_key``, ``retained_only``,
        ``event_time_order``); readers subscribing with ``read_compacted`` then read through it."""
        t = self._topic(topic)
        return Compactor(self.store, t.persistent.ml, CompactionOptions(**options)).compact()

    def _compacted_view(self, sub: _Subscription) -> None:
        """``CompactedTopicImpl`` for a ``read_compacted`` subscription: below the horizon, the compacted
        ledger's entries replace the topic's, and the entries compaction dropped are skipped."""
        view = CompactedTopic.open(self.store, sub.topic.persistent.ml)
        sub.compacted_view = view
        sub.compacted = {}
        if view.horizon is None:
            return
        kept = {tuple(p): data for p, data in view.compacted_entries()}
        for i, e in enumerate(sub.topic.entries):
            if e.position > view.horizon:
                break
            data = kept.get(tuple(e.position))
            if data is None:
                sub.acked.add(i)
            else:
                sub.compacted[i] = data

    def _push(self, c: _Consumer, topic: _Topic, i: int, redelivery_count: int) -> None:
        e = topic.entries[i]
        stored = c.sub.compacted[i] if c.sub.compacted and i in c.sub.compacted else topic.read(i)
        flags = c.conn.feature_flags
        try:  # the broker's dispatch rule (PIP-70 stripping, the pre-v11 checksum), the topic's own
            data = topic.persistent.dispatch_bytes(
                stored, c.conn.protocol_version, bool(flags is not None and flags.supports_broker_entry_metadata)
            )
        except PulsarkitError:
            data = stored  # a broken header goes out as stored: the consumer decides, as with Pulsar
        cmd = command(
            "MESSAGE",
            consumer_id=c.consumer_id,
            message_id={"ledgerId": e.position.ledger_id, "entryId": e.position.entry_id},
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
