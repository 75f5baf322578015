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
registered (:func:`pulsarkit.analysis.schemas.schema_history` of the topic: the version the message's
``schema_version`` names, its SHA-256 checked; field order and all come from the data, not from a
class), and replayed.
A namespace whose events cannot be read or decoded gets a note naming why and is left out (its topics
then follow the namespace's or the broker's policy, which the note says), and a ``topic_policies``
issue in ``dd.issues`` (a warning; ``--strict`` exits 3)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..broker.schema_registry import StoredSchema, schema_version_number
from ..broker.topic_name import TopicName, ml_to_topic, partition_of
from ..codec.avro import AvroError, Schema
from ..codec.entry import Entry
from ..errors import InvalidTopicNameError, PulsarkitError
from ..scan.datadir import DataDir
from ..scan.records import Issue
from .compaction import compacted_topic
from .schemas import schema_history

CHANGE_EVENTS = "__change_events"


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
        try:
            ns = TopicName.parse(self.topic).namespace_name
        except InvalidTopicNameError:  # an event's fields, not checked when replayed
            ns = self.topic.split("://", 1)[-1].rpartition("/")[0]
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


def _schema(dd: DataDir, topic: str, version: int | None, registry: dict[int, StoredSchema]) -> StoredSchema:
    """The stored schema a message names by its version (none named: the newest), from the topic's
    schema history (:func:`.schemas.schema_history`, read at the first value): Avro, and its definition
    the one the locator's hash names."""
    if not registry:
        registry.update((s.version, s) for s in schema_history(dd, [topic]))
        if not registry:
            raise PulsarkitError(f"no schema registered for {topic}")
    stored = registry.get(version if version is not None else max(registry))
    if stored is None:
        raise PulsarkitError(f"no schema version {version} registered for {topic}")
    if stored.type != "AVRO" or not stored.hash_matches:
        why = f"a {stored.type} schema" if stored.type != "AVRO" else "its definition does not match its hash"
        raise PulsarkitError(f"schema version {stored.version} of {topic}: {why}")
    return stored


def _topic_of(ev: dict[str, Any]) -> str | None:
    e = ev.get("topicPoliciesEvent")
    if not isinstance(e, dict) or not all(isinstance(e.get(k), str) for k in ("tenant", "namespace", "topic")):
        return None
    return f"{e.get('domain') or 'persistent'}://{e['tenant']}/{e['namespace']}/{e['topic']}"


def _replay(dd: DataDir, ml: str, out: TopicPolicies) -> None:
    topic_name = ml_to_topic(ml)
    registry: dict[int, StoredSchema] = {}
    parsed: dict[int, Schema] = {}
    levels = {False: out.local, True: out.global_}
    by_key: dict[str, tuple[str, bool]] = {}
    for pos, data in compacted_topic(dd, topic_name).read_entries():
        e = Entry.parse(data, verify_checksum=False)  # as the compacted view reads it: the bookie's digest verified it
        if e.metadata.HasField("marker_type"):
            continue
        version = schema_version_number(e.metadata.schema_version)
        for m in e.messages():
            if m.null_value:  # a deletion: the key's policies go
                ident = by_key.pop(m.key or "", None)
                if ident is None and m.key:
                    base, _ = partition_of(m.key)
                    ident = (base or m.key, False)
                if ident is not None:
                    levels[ident[1]].pop(ident[0], None)
                continue
            stored = _schema(dd, topic_name, version, registry)
            if stored.version not in parsed:
                parsed[stored.version] = Schema(stored.definition)
            try:
                ev = parsed[stored.version].decode(m.payload)
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
        try:
            tn = TopicName.from_ml(ml)
        except InvalidTopicNameError:
            continue
        if tn.domain != "persistent" or tn.local != CHANGE_EVENTS:
            continue
        tenant_ns = tn.namespace_name
        if wanted is not None and tenant_ns not in wanted:
            continue
        try:
            _replay(dd, ml, out)
        except (PulsarkitError, ValueError, KeyError, TypeError) as e:
            for level in (out.local, out.global_):
                for t in [t for t in level if _namespace_of(t) == tenant_ns]:
                    del level[t]
            out.notes.append(
                f"topic policies of namespace {tenant_ns} not read ({e}); its topics are simulated with "
                "the namespace's or the broker's policy"
            )
            # damage, not a setting: a warning, and --strict's exit 3
            dd.report(Issue("topic_policies", ml_to_topic(ml), None, f"topic policies not read: {e}"))
    return out


__all__ = ["CHANGE_EVENTS", "TopicPolicies", "TopicPolicyEvent", "read_topic_policies"]


def _namespace_of(topic: str) -> str | None:
    """``tenant/namespace`` (v1: ``tenant/cluster/namespace``) of a topic name, None when it is none: a
    string prefix would take v1 topics of ``t/c/ns`` for namespace ``t/c``'s."""
    try:
        return TopicName.parse(topic).namespace_name
    except InvalidTopicNameError:
        return None
