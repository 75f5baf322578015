"""Topic and managed-ledger names as Pulsar forms them (``TopicName``): domains, partitions, the
URL-encoded local name, system topics, and what a managed ledger's name says about its kind."""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import InvalidTopicNameError

#: Ledger kinds (``Ledger.kind``).
KINDS = ("topic", "cursor", "schema", "compacted", "transaction_log", "pending_ack", "deleted", "unknown")
TXN_LOG_PREFIX = "pulsar/system/persistent/__transaction_log_"
PENDING_ACK_SUFFIX = "__transaction_pending_ack"
#: Cursors the broker keeps for itself (not subscriptions a user created).
SYSTEM_CURSORS = ("pulsar.dedup", "__compaction", "transaction.subscription", "__pending_ack_state")
COMPACTION_CURSOR = "__compaction"
COMPACTED_LEDGER_PROPERTY = "CompactedTopicLedger"


#: Topic domains (``TopicDomain``), as a name spells them once parsed (the parse ignores case).
DOMAINS = ("persistent", "non-persistent")
PARTITION_SUFFIX = "-partition-"
#: Tenant, cluster and namespace names (``NamedEntity.checkName``: Java's ``\\w`` is ASCII).
_NAMED = re.compile(r"[-=:.\w]+", re.ASCII)


@dataclass(frozen=True)
class TopicName:
    """A topic name as Pulsar's ``TopicName`` parses it: v2 ``domain://tenant/namespace/local`` or the
    legacy v1 ``domain://tenant/cluster/namespace/local`` (``cluster`` set). The local name is never
    empty; a v2 one holds no ``/`` (one more ``/`` makes the name v1), a v1 one may."""

    domain: str
    tenant: str
    cluster: str | None
    namespace: str
    local: str

    def __post_init__(self) -> None:
        if self.domain not in DOMAINS:
            raise InvalidTopicNameError(f"invalid topic domain {self.domain!r}: not one of {', '.join(DOMAINS)}")
        for what, part in (("tenant", self.tenant), ("cluster", self.cluster), ("namespace", self.namespace)):
            if part is not None and not _NAMED.fullmatch(part):
                raise InvalidTopicNameError(f"invalid {what} {part!r}: not one or more of a-z A-Z 0-9 _ - = : .")
        if not self.local:
            raise InvalidTopicNameError(f"topic name {self.full!r} has an empty local name")
        if self.cluster is None and "/" in self.local:
            raise InvalidTopicNameError(f"a v2 topic's local name holds no '/': {self.local!r}")

    @classmethod
    def parse(cls, topic: str) -> TopicName:
        """``persistent://t/ns/x``, ``persistent://t/cluster/ns/x``, the short ``t/ns/x`` or ``x``
        (``public/default``); :class:`InvalidTopicNameError` for what ``TopicName.get`` refuses."""
        if "://" not in topic:
            parts = [p for p in topic.split("/") if p]  # StringUtils.split: empty tokens dropped
            if len(parts) == 1:
                topic = f"persistent://public/default/{parts[0]}"
            elif len(parts) == 3:
                topic = f"persistent://{topic}"
            else:
                raise InvalidTopicNameError(f"invalid short topic name {topic!r}: tenant/namespace/topic or topic")
        domain, rest = topic.split("://", 1)
        parts = rest.split("/", 3)
        if len(parts) == 3:
            return cls(domain.lower(), parts[0], None, parts[1], parts[2])
        if len(parts) == 4:
            return cls(domain.lower(), parts[0], parts[1], parts[2], parts[3])
        raise InvalidTopicNameError(f"invalid topic name {topic!r}")

    @classmethod
    def from_ml(cls, ml_name: str) -> TopicName:
        """The topic of a managed-ledger name (``getPersistenceNamingEncoding``): v2
        ``tenant/namespace/domain/local``, v1 ``tenant/cluster/namespace/domain/local``, the local
        name URL-encoded; :class:`InvalidTopicNameError` for any other shape."""
        parts = ml_name.split("/")
        if len(parts) == 4:
            return cls(parts[2], parts[0], None, parts[1], urllib.parse.unquote_plus(parts[3]))
        if len(parts) == 5:
            return cls(parts[3], parts[0], parts[1], parts[2], urllib.parse.unquote_plus(parts[4]))
        raise InvalidTopicNameError(f"invalid managed-ledger name {ml_name!r}: not a topic's")

    @property
    def is_v2(self) -> bool:
        return self.cluster is None

    @property
    def namespace_name(self) -> str:
        """``tenant/namespace``, or ``tenant/cluster/namespace`` for a v1 name."""
        return "/".join(p for p in (self.tenant, self.cluster, self.namespace) if p is not None)

    @property
    def full(self) -> str:
        return f"{self.domain}://{self.namespace_name}/{self.local}"

    @property
    def ml_name(self) -> str:
        return f"{self.namespace_name}/{self.domain}/{encode_local(self.local)}"


def encode_local(local: str) -> str:
    """Java's ``URLEncoder.encode(s, UTF_8)`` (Pulsar's ``Codec.encode``): ``*`` kept, ``~`` escaped, a
    lone surrogate as ``?``, where Python's ``quote_plus`` would do the opposite or fail."""
    return urllib.parse.quote_plus(local, safe="*", errors="replace").replace("~", "%7E")


def ml_to_topic(ml_name: str) -> str:
    """A topic's managed-ledger name to its topic name (``persistent://t/ns/x``, v1
    ``persistent://t/cluster/ns/x``); any other managed ledger keeps its name (the managed-ledger
    layer allows free names)."""
    try:
        return TopicName.from_ml(ml_name).full
    except InvalidTopicNameError:
        return ml_name


def topic_to_ml(topic: str) -> str:
    """A topic name (any form :meth:`TopicName.parse` takes) to its managed-ledger name;
    :class:`InvalidTopicNameError` for a name Pulsar refuses."""
    return TopicName.parse(topic).ml_name


def ml_paths(nodes: Mapping[str, bytes]) -> tuple[dict[str, str], dict[str, tuple[str, str]], list[str]]:
    """The nodes below ``/managed-ledgers/`` (paths relative to it, with their data) sorted out:
    ``(managed ledgers, cursors, unrecognised)``, the first two by path (a managed ledger's name, a
    cursor's ``(managed ledger, encoded name)``). A cursor is one level below its managed ledger. A
    five-part path is a v2 cursor or a v1 managed ledger; both only with a local name or namespace named
    like a domain, then a cursor when its parent holds data (a v1 namespace's parent node holds none).
    Empty parents (ZooKeeper keeps them) are neither; what is left, unless an empty node at a parent's
    level, is unrecognised."""

    def is_ml(path: str) -> bool:
        try:
            TopicName.from_ml(path)
        except InvalidTopicNameError:
            return False
        return True

    mls: dict[str, str] = {}
    cursors: dict[str, tuple[str, str]] = {}
    for path, data in nodes.items():
        parent, _, leaf = path.rpartition("/")
        as_cursor = bool(leaf) and is_ml(parent)
        if as_cursor and (not is_ml(path) or nodes.get(parent)):
            cursors[path] = (parent, leaf)
        elif is_ml(path):
            mls[path] = path
    known = set(mls) | set(cursors)
    parents = {path[:i] for path in known for i, c in enumerate(path) if c == "/"}
    # an empty leaf at a parent's level (a namespace or domain left after its topics) is no lost topic
    odd = [
        p
        for p in nodes
        if p not in known
        and (nodes[p] or (p not in parents and p.count("/") >= 3 and p.rpartition("/")[2] not in DOMAINS))
    ]
    # an empty managed ledger that is only a prefix (a v1 namespace named like a domain) is no topic
    for p in [p for p in mls if p in parents and not nodes[p] and not any(c[0] == p for c in cursors.values())]:
        del mls[p]
    return mls, cursors, sorted(odd)


def partition_of(topic: str) -> tuple[str | None, int]:
    """(partitioned topic, index) of ``…-partition-N``, else (None, -1). ``N`` as ``getPartitionIndex``
    takes it: a non-negative int32 written without sign or leading zeros."""
    base, sep, n = topic.rpartition(PARTITION_SUFFIX)
    if sep and n.isdecimal() and len(n) <= 10 and int(n) <= 2**31 - 1 and len(n) == len(str(int(n))):
        return base, int(n)
    return None, -1


def is_system_topic(topic: str) -> bool:
    """Pulsar's system topics: the ``pulsar/system`` namespace, ``__``-prefixed names
    (``__change_events``, ``__transaction_buffer_snapshot``…) and pending-ack stores."""
    try:
        tn = TopicName.parse(topic)
        ns, name = tn.namespace_name, tn.local
    except InvalidTopicNameError:  # a managed ledger's free name
        ns, _, name = topic.split("://", 1)[-1].rpartition("/")
    if ns == "pulsar/system":
        return True
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
    "DOMAINS",
    "KINDS",
    "PARTITION_SUFFIX",
    "PENDING_ACK_SUFFIX",
    "SYSTEM_CURSORS",
    "TXN_LOG_PREFIX",
    "TopicName",
    "encode_local",
    "is_system_topic",
    "ml_kind",
    "ml_paths",
    "ml_to_topic",
    "partition_of",
    "topic_to_ml",
]
