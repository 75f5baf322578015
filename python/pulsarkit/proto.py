"""Protobuf classes for Pulsar's wire messages, built from pulsarkit's own ``proto/`` files.

The descriptors are compiled into the native module at build time, so the Rust and Python sides
always agree on every field::

    from pulsarkit.proto import MessageMetadata, BaseCommand
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from . import _native

_fds = descriptor_pb2.FileDescriptorSet.FromString(_native.FILE_DESCRIPTOR_SET)
pool = descriptor_pool.DescriptorPool()
for _f in _fds.file:
    pool.Add(_f)


def message_class(name: str, package: str = "pulsar.proto") -> type[Any]:
    """The protobuf class of ``<package>.<name>`` (Pulsar's wire messages by default). Made at run time from
    the descriptors: to type checkers its fields and enum values are ``Any``."""
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{package}.{name}"))


MessageIdData = message_class("MessageIdData")
KeyValue = message_class("KeyValue")
KeyLongValue = message_class("KeyLongValue")
EncryptionKeys = message_class("EncryptionKeys")
MessageMetadata = message_class("MessageMetadata")
SingleMessageMetadata = message_class("SingleMessageMetadata")
BrokerEntryMetadata = message_class("BrokerEntryMetadata")
FeatureFlags = message_class("FeatureFlags")
Schema = message_class("Schema")
BaseCommand = message_class("BaseCommand")
CommandConnect = message_class("CommandConnect")
CommandConnected = message_class("CommandConnected")
CommandProducer = message_class("CommandProducer")
CommandProducerSuccess = message_class("CommandProducerSuccess")
CommandSend = message_class("CommandSend")
CommandSendReceipt = message_class("CommandSendReceipt")
CommandSendError = message_class("CommandSendError")
CommandSubscribe = message_class("CommandSubscribe")
CommandFlow = message_class("CommandFlow")
CommandMessage = message_class("CommandMessage")
CommandAck = message_class("CommandAck")
CommandSuccess = message_class("CommandSuccess")
CommandError = message_class("CommandError")


# Pulsar's managed-ledger metadata values (proto/MLDataFormats.proto).
def _ml(name: str) -> type[Any]:
    return message_class(name, "pulsarkit.mledger")


ManagedLedgerInfo = _ml("ManagedLedgerInfo")
LedgerInfo = _ml("ManagedLedgerInfo.LedgerInfo")
ManagedCursorInfo = _ml("ManagedCursorInfo")
PositionInfo = _ml("PositionInfo")
NestedPositionInfo = _ml("NestedPositionInfo")
MessageRange = _ml("MessageRange")
LongProperty = _ml("LongProperty")
StringProperty = _ml("StringProperty")
BatchedEntryDeletionIndexInfo = _ml("BatchedEntryDeletionIndexInfo")
LongListMap = _ml("LongListMap")
MLKeyValue = _ml("KeyValue")
OffloadContext = _ml("OffloadContext")
ManagedLedgerInfoMetadata = _ml("ManagedLedgerInfoMetadata")
ManagedCursorInfoMetadata = _ml("ManagedCursorInfoMetadata")

# BookKeeper's ledger metadata and DbLedgerStorage's per-ledger record (proto/BookKeeperFormats.proto).
LedgerMetadataFormat = message_class("LedgerMetadataFormat", "pulsarkit.bookkeeper")
LedgerData = message_class("LedgerData", "pulsarkit.bookkeeper")

# How a broker stores topic schemas (proto/SchemaStorageFormat.proto).
StoredSchemaInfo = message_class("SchemaInfo", "pulsarkit.schema")
SchemaEntry = message_class("SchemaEntry", "pulsarkit.schema")
SchemaIndexEntry = message_class("IndexEntry", "pulsarkit.schema")
SchemaLocator = message_class("SchemaLocator", "pulsarkit.schema")

_enum = pool.FindEnumTypeByName
CompressionType = {v.name: v.number for v in _enum("pulsar.proto.CompressionType").values}
ServerError = {v.name: v.number for v in _enum("pulsar.proto.ServerError").values}
ProtocolVersion = {v.name: v.number for v in _enum("pulsar.proto.ProtocolVersion").values}
CommandType = {
    v.name: v.number for v in pool.FindMessageTypeByName("pulsar.proto.BaseCommand").enum_types_by_name["Type"].values
}

#: Field name of each BaseCommand type's sub-message (``BaseCommand.SEND`` -> ``"send"``).
COMMAND_FIELD = {
    f.number: f.name for f in pool.FindMessageTypeByName("pulsar.proto.BaseCommand").fields if f.number != 1
}

__all__ = [
    "COMMAND_FIELD",
    "BaseCommand",
    "BatchedEntryDeletionIndexInfo",
    "BrokerEntryMetadata",
    "CommandType",
    "CompressionType",
    "EncryptionKeys",
    "FeatureFlags",
    "KeyLongValue",
    "KeyValue",
    "LedgerData",
    "LedgerInfo",
    "LedgerMetadataFormat",
    "LongListMap",
    "LongProperty",
    "MLKeyValue",
    "ManagedCursorInfo",
    "ManagedCursorInfoMetadata",
    "ManagedLedgerInfo",
    "ManagedLedgerInfoMetadata",
    "MessageIdData",
    "MessageMetadata",
    "MessageRange",
    "NestedPositionInfo",
    "OffloadContext",
    "PositionInfo",
    "ProtocolVersion",
    "Schema",
    "SchemaEntry",
    "SchemaIndexEntry",
    "SchemaLocator",
    "ServerError",
    "SingleMessageMetadata",
    "StoredSchemaInfo",
    "StringProperty",
    "message_class",
    "pool",
]


# The transaction coordinator's log and the pending-ack stores (proto/PulsarTransactionMetadata.proto,
# proto/TransactionPendingAck.proto).
Subscription = message_class("Subscription")
TransactionMetadataEntry = message_class("TransactionMetadataEntry")
BatchedTransactionMetadataEntry = message_class("BatchedTransactionMetadataEntry")
PendingAckMetadata = message_class("PendingAckMetadata", "pulsar.proto.transaction")
PendingAckMetadataEntry = message_class("PendingAckMetadataEntry", "pulsar.proto.transaction")
BatchedPendingAckMetadataEntry = message_class("BatchedPendingAckMetadataEntry", "pulsar.proto.transaction")
