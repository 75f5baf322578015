"""Message payloads decoded with the topic's Pulsar schema (``SchemaType``) into typed Arrow values.

``info.py`` holds a schema version as the decoder takes it (:class:`SchemaInfo`) and the ``KEY_VALUE``
layouts, ``primitive.py`` the primitive types (column-wise), ``record.py`` the record types (``AVRO``,
``JSON``, ``PROTOBUF_NATIVE``, ``PROTOBUF``), ``topic.py`` a topic's schema history as one table schema
(:class:`TopicSchema`): every message decoded with the version it names, resolved into the newest one."""

from .info import SchemaDecodeError, SchemaEvolutionError, SchemaInfo
from .topic import Codec, Decoded, TopicSchema, make_codec

__all__ = [
    "Codec",
    "Decoded",
    "SchemaDecodeError",
    "SchemaEvolutionError",
    "SchemaInfo",
    "TopicSchema",
    "make_codec",
]
