"""The retention, TTL and bookie GC settings a data directory lives under, and where each comes from.

Three sources, resolved as the broker and the bookie resolve them, each value tagged with its source:

* **flags**: what the caller asks to simulate (``WhatIf`` fields that are not None) win over everything;
* **policies stored in the data**: a topic's own policies (:mod:`.topic_policies`: the events of its
  namespace's ``__change_events`` topic, replayed; a local topic value before a global one), else its
  namespace's ``/admin/policies/<tenant>/<namespace>`` JSON in the configuration store
  (``retention_policies`` and ``message_ttl_in_seconds``). As in the broker, each level's retention
  policy replaces the one below as a whole (time and size together), the TTL on its own, and a missing
  one (null) falls back to the next level; ``-1`` is unlimited;
* **configuration files beside the data**: found in the data directory or a ``conf/`` directory in it
  or up to two levels above it (a standalone's ``pulsar/conf/standalone.conf`` for ``pulsar/data``).
  A standalone reads ``standalone.conf`` (or the file given) as the broker's and the bookie's whole
  configuration, so when there is one it is the only file read; otherwise ``broker.conf`` gives the
  broker's ``defaultRetention*``, ``ttlDurationDefaultInSeconds``, ``retentionCheckIntervalInSeconds``
  and ``bookkeeper.conf``/``bk_server.conf`` the bookie's GC settings. A GC key the bookie's file does
  not set is BookKeeper's own default (``gcWaitTime`` 600000, ``majorCompactionThreshold`` 0.8...);
* **defaults**: Pulsar's shipped values (its ``conf/bookkeeper.conf`` for GC) when no file is found.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..bookkeeper.gc import GcConfig
from ..broker.topic_name import ml_to_topic
from ..errors import PulsarkitError
from .topic_policies import TopicPolicies

#: (broker.conf key, default): Pulsar's shipped values
BROKER_KEYS: dict[str, tuple[str, int]] = {
    "retention_time_minutes": ("defaultRetentionTimeInMinutes", 0),
    "retention_size_mb": ("defaultRetentionSizeInMB", 0),
    "ttl_seconds": ("ttlDurationDefaultInSeconds", 0),
    "retention_check_interval_s": ("retentionCheckIntervalInSeconds", 120),
}
#: GcConfig field -> bookie configuration key
BOOKIE_KEYS: dict[str, str] = {
    "gc_wait_time_ms": "gcWaitTime",
    "minor_compaction_threshold": "minorCompactionThreshold",
    "minor_compaction_interval_s": "minorCompactionInterval",
    "major_compaction_threshold": "majorCompactionThreshold",
    "major_compaction_interval_s": "majorCompactionInterval",
}
_BROKER_ONLY = ("broker.conf",)
_BOOKIE_ONLY = ("bookkeeper.conf", "bk_server.conf")
#: BookKeeper's ServerConfiguration defaults, what a bookie runs with for a key its file does not set
#: (GcConfig's defaults are Pulsar's conf/bookkeeper.conf, used when no bookie configuration is found)
BOOKKEEPER_DEFAULTS: dict[str, Any] = {
    "gc_wait_time_ms": 600_000,
    "minor_compaction_threshold": 0.2,
    "minor_compaction_interval_s": 3600,
    "major_compaction_threshold": 0.8,
    "major_compaction_interval_s": 86_400,
}

DEFAULT, FLAG = "default", "flag"


class PolicyError(PulsarkitError):
    """A configuration file or a value in it that cannot be used."""


def read_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    """A Java ``.properties`` file's keys and values (``#``/``!`` comments, ``=``/``:`` separators,
    ``\\`` line continuations); an empty value counts as unset, as the servers read it."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise PolicyError(f"{path}: cannot read: {e.strerror or e}") from e
    out: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip()
        pending = ""
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        if not line or line[0] in "#!":
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        key, value = (line[:cut], line[cut + 1 :]) if cut >= 0 else (line, "")
        if value.strip():
            out[key.strip()] = value.strip()
    return out


def find_config_files(start_dirs: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """The Pulsar and BookKeeper configuration files beside the data: in each start directory, its
    ``conf/``, and the same up to two levels above; the nearest level holding any wins."""
    names = ("standalone.conf", *_BROKER_ONLY, *_BOOKIE_ONLY)
    found: list[Path] = []
    for start in start_dirs:
        d = Path(os.path.abspath(start))
        for _ in range(3):
            here = [c for base in (d, d / "conf") for n in names if (c := base / n).is_file()]
            if here:
                found += [p for p in here if p not in found]
                break
            d = d.parent
    return found


def _number(raw: str, kind: type, where: str) -> Any:
    try:
        return kind(raw)
    except ValueError:
        raise PolicyError(f"{where}: {raw!r} is not a {kind.__name__}") from None


@dataclass(frozen=True)
class TopicPolicy:
    """The retention and TTL one managed ledger is trimmed with, and where each came from."""

    retention_time_minutes: int
    retention_size_mb: int
    ttl_seconds: int
    retention_source: str
    ttl_source: str


@dataclass
class Settings:
    """Every resolved setting: broker-wide values, the bookie's GC, per-namespace policies, with sources."""

    broker: dict[str, int]
    gc: GcConfig
    #: setting name (a ``BROKER_KEYS`` or ``GcConfig`` field) -> its source
    sources: dict[str, str]
    #: namespace -> its policies' JSON, as stored
    namespaces: dict[str, dict[str, Any]] = field(default_factory=dict)
    config_files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: flag overrides of the per-topic values (retention_time_minutes, retention_size_mb, ttl_seconds)
    overrides: dict[str, int] = field(default_factory=dict)
    #: the topic-level policies replayed from the namespaces' ``__change_events`` topics
    topic_levels: TopicPolicies = field(default_factory=TopicPolicies)

    def topic(self, ml: str) -> TopicPolicy:
        """The policy of one managed ledger (``tenant/namespace/persistent/topic``): flag, else the topic's
        own policy (local, then global), else its namespace's, else the broker's default (from its
        configuration file or Pulsar's); retention and TTL each on their own."""
        ns = "/".join(ml.split("/")[:2])
        pol = self.namespaces.get(ns, {})
        where = f"namespace policy /admin/policies/{ns}"
        # (retention policy, ttl, source) of each level, highest first
        levels: list[tuple[Any, Any, str]] = [
            (ev.policies.get("retentionPolicies"), ev.policies.get("messageTTLInSeconds"), ev.where)
            for ev in self.topic_levels.of(ml_to_topic(ml))
        ]
        levels.append((pol.get("retention_policies"), pol.get("message_ttl_in_seconds"), where))
        time_m, size_mb = self.broker["retention_time_minutes"], self.broker["retention_size_mb"]
        r_src = self.sources["retention_time_minutes"]
        for rp, _, src in levels:
            if isinstance(rp, dict):
                time_m, size_mb = int(rp.get("retentionTimeInMinutes") or 0), int(rp.get("retentionSizeInMB") or 0)
                r_src = src
                break
        ttl, t_src = self.broker["ttl_seconds"], self.sources["ttl_seconds"]
        for _, level_ttl, src in levels:
            if isinstance(level_ttl, int) and not isinstance(level_ttl, bool):
                ttl, t_src = level_ttl, src
                break
        o = self.overrides
        if "retention_time_minutes" in o or "retention_size_mb" in o:
            time_m = o.get("retention_time_minutes", time_m)
            size_mb = o.get("retention_size_mb", size_mb)
            r_src = FLAG
        if "ttl_seconds" in o:
            ttl, t_src = o["ttl_seconds"], FLAG
        return TopicPolicy(time_m, size_mb, ttl, r_src, t_src)

    def as_dict(self) -> dict[str, Any]:
        return {
            "config_files": self.config_files,
            "sources": dict(self.sources),
            "namespace_policies": {
                ns: {k: p.get(k) for k in ("retention_policies", "message_ttl_in_seconds")}
                for ns, p in sorted(self.namespaces.items())
            },
            # per topic, each level it has a policy at, as the event set it
            "topic_policies": {
                topic: {
                    level: {
                        "retention_policies": lv[topic].policies.get("retentionPolicies"),
                        "message_ttl_in_seconds": lv[topic].policies.get("messageTTLInSeconds"),
                        "event": lv[topic].position,
                    }
                    for level, lv in (("local", self.topic_levels.local), ("global", self.topic_levels.global_))
                    if topic in lv
                }
                for topic in sorted({*self.topic_levels.local, *self.topic_levels.global_})
            },
            "notes": list(self.notes),
        }


def namespace_policies(nodes: Mapping[str, bytes], notes: list[str]) -> dict[str, dict[str, Any]]:
    """``tenant/namespace`` -> the policies JSON stored at ``/admin/policies/<tenant>/<namespace>``; a
    node that is not a JSON object becomes a note (and that namespace gets the broker's defaults)."""
    out: dict[str, dict[str, Any]] = {}
    root = "/admin/policies/"
    for path, data in nodes.items():
        rest = path[len(root) :].split("/") if path.startswith(root) else []
        if len(rest) != 2 or not all(rest):
            continue
        try:
            pol = json.loads(data or b"{}")
        except ValueError:
            pol = None
        if not isinstance(pol, dict):
            notes.append(f"{path}: not a JSON object; the broker's defaults are used for {'/'.join(rest)}")
            continue
        out["/".join(rest)] = pol
    return out


def resolve(
    nodes: Mapping[str, bytes],
    config_files: Sequence[str | os.PathLike[str]],
    overrides: Mapping[str, Any] | None = None,
    gc: GcConfig | None = None,
    topic_policies: TopicPolicies | None = None,
) -> Settings:
    """Resolves every setting (the module docstring's order). ``overrides``: flag values by name
    (``BROKER_KEYS`` and ``GcConfig`` fields), None values ignored; ``gc``: a whole GC configuration
    given by the caller (each field then counts as a flag); ``topic_policies``: the topic-level policies
    (:func:`.topic_policies.read_topic_policies`; None: none)."""
    flags = {k: v for k, v in (overrides or {}).items() if v is not None}
    notes: list[str] = []
    props = [(str(p), read_properties(p)) for p in config_files]
    # a standalone reads its one file as the broker's and as the bookie's whole configuration: beside it,
    # broker.conf and bookkeeper.conf are not what it runs with (a file of another name given: the same)
    whole = [(p, kv) for p, kv in props if Path(p).name not in _BROKER_ONLY + _BOOKIE_ONLY]
    if whole:
        read = {p for p, _ in whole}
        notes += [f"{p}: not read (a standalone reads {whole[0][0]} only)" for p, _ in props if p not in read]
        broker_files = bookie_files = whole
    else:
        broker_files = [(p, kv) for p, kv in props if Path(p).name in _BROKER_ONLY]
        bookie_files = [(p, kv) for p, kv in props if Path(p).name in _BOOKIE_ONLY]
    sources: dict[str, str] = {}
    broker: dict[str, int] = {}
    for name, (key, default) in BROKER_KEYS.items():
        value, src = default, DEFAULT
        for path, kv in broker_files:
            if key in kv:
                value, src = _number(kv[key], int, f"{path}: {key}"), f"config {path}"
                break
        if name in flags and name == "retention_check_interval_s":
            value, src = int(flags[name]), FLAG
        broker[name], sources[name] = value, src
    gc_values: dict[str, Any] = {}
    for name, key in BOOKIE_KEYS.items():
        kind = type(getattr(GcConfig, name))
        src = DEFAULT
        for path, kv in bookie_files:
            if key in kv:
                gc_values[name], src = _number(kv[key], kind, f"{path}: {key}"), f"config {path}"
                break
        else:
            if bookie_files:  # the bookie's configuration lacks it: BookKeeper's own default, not Pulsar's file's
                gc_values[name], src = (
                    BOOKKEEPER_DEFAULTS[name],
                    f"BookKeeper's {DEFAULT}: {bookie_files[0][0]} does not set it",
                )
        if gc is not None:
            gc_values[name], src = getattr(gc, name), FLAG
        if name in flags:
            gc_values[name], src = kind(flags[name]), FLAG
        sources[name] = src
    base = gc if gc is not None else GcConfig()
    namespaces = namespace_policies(nodes, notes)
    per_topic = ("retention_time_minutes", "retention_size_mb", "ttl_seconds")
    topic_flags = {k: int(flags[k]) for k in per_topic if k in flags}
    for k in topic_flags:
        sources[k] = FLAG
    levels = topic_policies if topic_policies is not None else TopicPolicies()
    notes += levels.notes
    return Settings(
        broker=broker,
        gc=dataclasses.replace(base, **gc_values),
        sources=sources,
        namespaces=namespaces,
        config_files=[p for p, _ in props],
        notes=notes,
        overrides=topic_flags,
        topic_levels=levels,
    )
