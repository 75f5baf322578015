"""One client connection of the fake broker: frames in, commands handled, frames out."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from .. import proto
from ..codec.commands import FrameDecoder, command, encode_command
from ..errors import PulsarkitError
from ..managed_ledger import Position
from .state import BrokerError, RecordedSend, _Consumer, _copy, _start_position, _Subscription, _Topic

if TYPE_CHECKING:
    from .fake_broker import FakeBroker

#: The newest protocol version pulsarkit's proto knows.
OWN_PROTOCOL_VERSION: int = max(proto.ProtocolVersion.values())
FRAME_PADDING = 10 * 1024
_U64 = (1 << 64) - 1
_T = proto.CommandType
_TYPE_NAME = {v: k for k, v in _T.items()}


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

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for c in list(self.consumers.values()):
            self.broker._remove_consumer(c)
        self.consumers.clear()
        self.writer.close()

    def _close_consumer(self, consumer_id: int) -> _Consumer | None:
        """The connection's consumer ``consumer_id`` closed (None: there was none)."""
        c = self.consumers.pop(consumer_id, None)
        if c is not None:
            self.broker._remove_consumer(c)
        return c

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
            c = self._close_consumer(r.consumer_id)
            if c is None:
                self.error(r.request_id, BrokerError("ConsumerNotFound", f"no consumer {r.consumer_id}"))
                return
            c.sub.topic.subscriptions.pop(c.sub.name, None)
            self.send(command("SUCCESS", request_id=r.request_id))
        elif t == _T["CLOSE_CONSUMER"]:
            self._close_consumer(cmd.close_consumer.consumer_id)
            self.send(command("SUCCESS", request_id=cmd.close_consumer.request_id))
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
                last_sequence_id=topic.persistent.last_sequence_id(name),
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
            injected = b.on_send(topic.name, rec.send, rec.headers_and_payload) if b.on_send else None
            if isinstance(injected, BrokerError):
                raise injected
        except BrokerError as e:
            rec.error = e
            self._send_error(s, e)
            return
        r = topic.persistent.publish(
            rec.headers_and_payload,
            pname,
            s.sequence_id,
            s.highest_sequence_id if s.HasField("highest_sequence_id") else None,
            s.num_messages if s.HasField("num_messages") else 1,
            s.is_chunk,
        )
        if r.server_error is not None:
            rec.error = BrokerError(r.server_error, r.error or r.status)
            self._send_error(s, rec.error)
            return
        ledger_id, entry_id = r.message_id.ledger_id, r.message_id.entry_id
        rec.ledger_id, rec.entry_id = ledger_id, entry_id
        # A duplicate (PIP-6) is acknowledged with -1:-1 and not stored again. The ids are Java
        # longs on the wire, so -1 travels as the all-ones uint64.
        if r.status == "OK":
            b._stored(topic, Position(ledger_id, entry_id))
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
            if r.read_compacted:
                b._compacted_view(sub)
            if r.durable:
                sub.cursor = topic.persistent.ml.open_cursor(
                    r.subscription, "latest" if r.initialPosition == 0 else "earliest"
                )
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
                pos = topic.entries[i].position
                ack_set = list(mid.ack_set) or None
                if a.ack_type == 1:  # Cumulative
                    sub.acked.update(range(i + 1))
                    if sub.cursor is not None and pos > sub.cursor.mark_delete_position:
                        sub.cursor.mark_delete(pos, ack_set=ack_set)
                else:
                    if not any(mid.ack_set):  # a partial batch ack leaves the entry pending
                        sub.acked.add(i)
                    if sub.cursor is not None:
                        sub.cursor.delete(pos, ack_set=ack_set)
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
            pos = _start_position(topic, r.message_id)
        elif r.HasField("message_publish_time"):
            # The broker's PersistentMessageFinder (the topic's), over the managed ledger
            found = topic.persistent.find_position_by_time(r.message_publish_time)
            pos = len(topic.entries) if found is None else topic.index_of(*found)
        else:
            self.error(r.request_id, BrokerError("MetadataError", "seek without a position"))
            return
        sub.acked = set(range(pos))
        sub.read_pos = pos
        sub.redeliver_queue.clear()
        if sub.cursor is not None:
            ml = topic.persistent.ml
            sub.cursor.reset(
                topic.entries[pos].position
                if pos < len(topic.entries)
                else ml.next_valid_position(ml.last_confirmed_entry)
            )
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
        if c.sub.compacted_view is not None:
            # A readCompacted consumer gets the compacted view's last message (PIP-429); the fields
            # are uint64 on the wire, so -1 (nothing to read) travels as all ones.
            m = c.sub.compacted_view.last_message_id()
            last.ledgerId, last.entryId = m.ledger_id & _U64, m.entry_id & _U64
            if m.batch_index >= 0:
                last.batch_index = m.batch_index
        elif topic.entries:
            e = topic.entries[-1]
            last.ledgerId, last.entryId = e.position
            if e.is_batch:
                last.batch_index = e.num_messages - 1
            md = c.sub.mark_delete
            mdp = resp.getLastMessageIdResponse.consumer_mark_delete_position
            if md >= 0:
                mdp.ledgerId, mdp.entryId = topic.entries[md].position
            else:
                first = topic.entries[0].position
                mdp.ledgerId, mdp.entryId = first.ledger_id, (first.entry_id - 1) % 2**64  # (l, -1)
        else:
            # Pulsar answers (-1, -1) for an empty topic; the fields are uint64 on the wire.
            last.ledgerId = last.entryId = 2**64 - 1
        self.send(resp)
