"""Topic-level policies as the broker holds them: replayed from each namespace's ``__change_events`` topic.

A topic policy (``pulsar-admin topics set-retention`` & co) is not in the metadata store: the broker
writes it as a message to ``persistent://<tenant>/<namespace>/__change_events``, keyed by the topic,
whose value is a ``PulsarEvent`` (event type ``TOPIC_POLICY``, an action, and a ``TopicPoliciesEvent``:
domain, tenant, namespace, the partitioned topic's local name, and its ``TopicPolicies``) encoded with
Pulsar's ``AVRO`` schema. The broker reads that topic compacted, from the start, and keeps the last state
per topic: ``UPDATE`` replaces, ``INSERT`` sets only if unset, ``DELETE`` (older brokers) and a message
with a null value (the tombstone a deletion writes, by key) remove. ``isGlobal`` policies are kept apart
from local ones: a local topic value wins over a global one, which wins over the namespace's.

Here the same: the compacted view of the topic (:func:`pulsarkit.analysis.compaction.compacted_topic`,
what a ``readCompacted`` reader gets) is read, each value decoded with the schema its producer
registered (``/schemas/<tenant>/<namespace>/__change_events`` -> the schema ledger's entry for the
message's ``schema_version``: field order and all come from the data, not from a class), and replayed.
A namespace whose events cannot be read or decoded gets a note naming why and is left out (its topics
then follow the namespace's or the broker's policy, which the note says), and a ``topic_policies``
issue in ``dd.issues`` (a warning; ``--strict`` exits 3)."""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..broker.topic_name import ml_to_topic, partition_of
from ..codec.avro import AvroError, Schema
from ..codec.entry import Entry
from ..codec.protobuf_wire import fields
from ..errors import PulsarkitError
from ..scan.datadir import DataDir
from ..scan.records import Issue
from .compaction import compacted_topic

CHANGE_EVENTS = "__change_events"
#: SchemaInfo.SchemaType of an Avro schema in the schema registry's entries
_AVRO = 5


@dataclass(frozen=True)
class TopicPolicyEvent:
    """The policies one topic has after the replay, at one level (local or global), and the event."""

    topic: str
    is_global: bool
    policies: dict[str, Any]
    #: ``ledger:entry`` of the event in the namespace's ``__change_events`` topic
    position: str

    @property
    def where(self) -> str:
        ns = "/".join(self.topic.split("://", 1)[-1].split("/")[:2])
        level = "global topic policy" if self.is_global else "topic policy"
        return f"{level} of {self.topic} ({ns}/{CHANGE_EVENTS} at {self.position})"


@dataclass
class TopicPolicies:
    """Every topic's policies by level (``persistent://tenant/ns/topic``, the partitioned topic's name)."""

    local: dict[str, TopicPolicyEvent] = field(default_factory=dict)
    global_: dict[str, TopicPolicyEvent] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def of(self, topic: str) -> list[TopicPolicyEvent]:
        """The levels that apply to ``topic`` (a partition's are its partitioned topic's), local first."""
        base, _ = partition_of(topic)
        name = base or topic
        return [lv[name] for lv in (self.local, self.global_) if name in lv]


def _schema_versions(dd: DataDir, tenant_ns: str) -> tuple[dict[int, tuple[int, int]], tuple[int, int] | None]:
    """The registered schema versions of the namespace's ``__change_events`` (version -> (ledger, entry))
    and the latest, from its ``SchemaLocator``: ``info`` (1) and ``index`` (2) are IndexEntry
    {version 1, position 2 {ledgerId 1, entryId 2}}."""
    raw = dd.nodes.get(f"/schemas/{tenant_ns}/{CHANGE_EVENTS}")
    if raw is None:
        raise PulsarkitError(f"no schema registered for {tenant_ns}/{CHANGE_EVENTS}")
    versions: dict[int, tuple[int, int]] = {}
    latest = None
    for f, entry in fields(raw):
        if f not in (1, 2) or not isinstance(entry, bytes):
            continue
        version, pos = None, (-1, -1)
        for f2, v in fields(entry):
            if f2 == 1 and isinstance(v, int):
                version = v
            elif f2 == 2 and isinstance(v, bytes):
                pf = dict(fields(v))
                pos = (int(pf.get(1, -1)), int(pf.get(2, -1)))
        if version is not None and pos[0] >= 0:
            versions[version] = pos
            if f == 1:
                latest = pos
    return versions, latest


def _schema_at(dd: DataDir, pos: tuple[int, int], cache: dict[tuple[int, int], Schema]) -> Schema:
    """The Avro schema stored in a schema ledger's entry: SchemaEntry {info 2: SchemaInfo {type 3, schema 4}}."""
    if pos not in cache:
        info = dict(fields(dd.read_entry(*pos))).get(2)
        if not isinstance(info, bytes):
            raise PulsarkitError(f"schema ledger {pos[0]} entry {pos[1]}: no schema info")
        si = dict(fields(info))
        if si.get(3) != _AVRO or not isinstance(si.get(4), bytes):
            raise PulsarkitError(f"schema ledger {pos[0]} entry {pos[1]}: not an Avro schema (type {si.get(3)})")
        cache[pos] = Schema(si[4])
    return cache[pos]


def _topic_of(ev: dict[str, Any]) -> str | None:
    e = ev.get("topicPoliciesEvent")
    if not isinstance(e, dict) or not all(isinstance(e.get(k), str) for k in ("tenant", "namespace", "topic")):
        return None
    return f"{e.get('domain') or 'persistent'}://{e['tenant']}/{e['namespace']}/{e['topic']}"


def _replay(dd: DataDir, ml: str, out: TopicPolicies) -> None:
    tenant_ns = "/".join(ml.split("/")[:2])
    registry: list[tuple[dict[int, tuple[int, int]], tuple[int, int] | None]] = []  # read at the first value
    cache: dict[tuple[int, int], Schema] = {}
    levels = {False: out.local, True: out.global_}
    by_key: dict[str, tuple[str, bool]] = {}
    for pos, data in compacted_topic(dd, ml_to_topic(ml)).read_entries():
        e = Entry.parse(data, verify_checksum=False)  # as the compacted view reads it: the bookie's digest verified it
        if e.metadata.HasField("marker_type"):
            continue
        sv = e.metadata.schema_version
        version = struct.unpack(">q", sv)[0] if len(sv) == 8 else None
        for m in e.messages():
            if m.null_value:  # a deletion: the key's policies go
                ident = by_key.pop(m.key or "", None)
                if ident is None and m.key:
                    base, _ = partition_of(m.key)
                    ident = (base or m.key, False)
                if ident is not None:
                    levels[ident[1]].pop(ident[0], None)
                continue
            if not registry:
                registry.append(_schema_versions(dd, tenant_ns))
            versions, latest = registry[0]
            where = versions.get(version, latest) if version is not None else latest
            if where is None:
                raise PulsarkitError(f"no schema version {version} registered for {tenant_ns}/{CHANGE_EVENTS}")
            try:
                ev = _schema_at(dd, where, cache).decode(m.payload)
            except AvroError as err:
                raise PulsarkitError(f"event at {pos}: {err}") from None
            topic = _topic_of(ev) if isinstance(ev, dict) else None
            if topic is None or ev.get("eventType") != "TOPIC_POLICY":
                continue
            pol = ev["topicPoliciesEvent"].get("policies")
            is_global = bool(isinstance(pol, dict) and pol.get("isGlobal"))
            level = levels[is_global]
            action = ev.get("actionType")
            if m.key:
                by_key[m.key] = (topic, is_global)
            event = TopicPolicyEvent(topic, is_global, pol, str(pos)) if isinstance(pol, dict) else None
            if action == "DELETE" or (action in ("UPDATE", "INSERT") and event is None):
                level.pop(topic, None)
            elif action == "UPDATE" or (action == "INSERT" and topic not in level):
                assert event is not None
                level[topic] = event


def read_topic_policies(dd: DataDir, namespaces: Iterable[str] | None = None) -> TopicPolicies:
    """The topic policies of every namespace holding a ``__change_events`` topic (or of ``namespaces``,
    ``tenant/namespace``), replayed as the broker replays them (the module docstring)."""
    out = TopicPolicies()
    wanted = set(namespaces) if namespaces is not None else None
    for ml in sorted(dd.ml_infos):
        parts = ml.split("/")
        if len(parts) != 4 or parts[2] != "persistent" or parts[3] != CHANGE_EVENTS:
            continue
        tenant_ns = "/".join(parts[:2])
        if wanted is not None and tenant_ns not in wanted:
            continue
        try:
            _replay(dd, ml, out)
        except (PulsarkitError, ValueError, KeyError, TypeError) as e:
            for level in (out.local, out.global_):
                for t in [t for t in level if t.split("://", 1)[-1].startswith(tenant_ns + "/")]:
                    del level[t]
            out.notes.append(
                f"topic policies of namespace {tenant_ns} not read ({e}); its topics are simulated with "
                "the namespace's or the broker's policy"
            )
            # damage, not a setting: a warning, and --strict's exit 3
            dd.report(Issue("topic_policies", ml_to_topic(ml), None, f"topic policies not read: {e}"))
    return out


__all__ = ["CHANGE_EVENTS", "TopicPolicies", "TopicPolicyEvent", "read_topic_policies"]
