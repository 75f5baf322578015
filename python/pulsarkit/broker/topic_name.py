"""Topic and managed-ledger names as Pulsar forms them (``TopicName``): domains, partitions, the
URL-encoded local name, system topics, and what a managed ledger's name says about its kind."""

from __future__ import annotations

import urllib.parse

#: Ledger kinds (``Ledger.kind``).
KINDS = ("topic", "cursor", "schema", "compacted", "transaction_log", "pending_ack", "deleted", "unknown")
TXN_LOG_PREFIX = "pulsar/system/persistent/__transaction_log_"
PENDING_ACK_SUFFIX = "__transaction_pending_ack"
#: Cursors the broker keeps for itself (not subscriptions a user created).
SYSTEM_CURSORS = ("pulsar.dedup", "__compaction", "transaction.subscription", "__pending_ack_state")
COMPACTION_CURSOR = "__compaction"
COMPACTED_LEDGER_PROPERTY = "CompactedTopicLedger"


def ml_to_topic(ml_name: str) -> str:
    """``tenant/ns/persistent/local`` (local name URL-encoded) to ``persistent://tenant/ns/local``."""
    parts = ml_name.split("/")
    if len(parts) == 4 and parts[2] in ("persistent", "non-persistent"):
        return f"{parts[2]}://{parts[0]}/{parts[1]}/{urllib.parse.unquote_plus(parts[3])}"
    return ml_name


def topic_to_ml(topic: str) -> str:
    """``persistent://tenant/ns/local`` to its managed-ledger name (local name URL-encoded as Pulsar does)."""
    if "://" not in topic:
        if topic.count("/") == 0:
            topic = f"persistent://public/default/{topic}"
        elif topic.count("/") == 2:
            topic = f"persistent://{topic}"
        else:
            return topic
    domain, rest = topic.split("://", 1)
    tenant, ns, local = rest.split("/", 2)
    return f"{tenant}/{ns}/{domain}/{urllib.parse.quote_plus(local, safe='')}"


def partition_of(topic: str) -> tuple[str | None, int]:
    """(partitioned topic, index) of ``…-partition-N``, else (None, -1)."""
    base, sep, n = topic.rpartition("-partition-")
    if sep and n.isdigit():
        return base, int(n)
    return None, -1


def is_system_topic(topic: str) -> bool:
    """Pulsar's system topics: the ``pulsar/system`` namespace, ``__``-prefixed names
    (``__change_events``, ``__transaction_buffer_snapshot``…) and pending-ack stores."""
    local = topic.split("://", 1)[-1]
    parts = local.split("/")
    if len(parts) >= 3 and parts[0] == "pulsar" and parts[1] == "system":
        return True
    name = parts[-1]
    base, idx = partition_of(name)
    return (base or name).startswith("__") or name.endswith(PENDING_ACK_SUFFIX)


def ml_kind(ml_name: str) -> str:
    if ml_name.startswith(TXN_LOG_PREFIX):
        return "transaction_log"
    if ml_name.endswith(PENDING_ACK_SUFFIX):
        return "pending_ack"
    return "topic"


__all__ = [
    "COMPACTED_LEDGER_PROPERTY",
    "COMPACTION_CURSOR",
    "KINDS",
    "PENDING_ACK_SUFFIX",
    "SYSTEM_CURSORS",
    "TXN_LOG_PREFIX",
    "is_system_topic",
    "ml_kind",
    "ml_to_topic",
    "partition_of",
    "topic_to_ml",
]
