"""Managed-ledger settings (``ManagedLedgerConfig``) and the custom metadata of its ledgers."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from .interceptor import ManagedLedgerInterceptor

MB = 1024 * 1024


@dataclass
class ManagedLedgerConfig:
    """Managed-ledger settings. Defaults are the broker's (``managedLedger*`` in broker.conf)."""

    max_entries_per_ledger: int = 50_000
    max_size_per_ledger_mb: int = 2048
    #: A full ledger rolls only once it is older than this (``managedLedgerMinLedgerRolloverTimeMinutes``).
    minimum_rollover_time_ms: int = 10 * 60_000
    #: Rolls a ledger this old (``managedLedgerMaxLedgerRolloverTimeMinutes``), plus up to 5 % jitter.
    maximum_rollover_time_ms: int = 240 * 60_000
    #: Retention (``defaultRetentionTimeInMinutes``/``defaultRetentionSizeInMB``): -1 = unlimited,
    #: 0 = delete consumed ledgers at once. Applied by :mod:`pulsarkit.managed_ledger.trim` and, when
    #: ``trim_on_rollover`` is set, after each rollover as the broker does.
    retention_time_ms: int = 0
    retention_size_mb: int = 0
    trim_on_rollover: bool = False
    ensemble_size: int = 1
    write_quorum_size: int = 1
    ack_quorum_size: int = 1
    digest_type: str = "CRC32C"
    #: The ledger password (MAC digests, the master key); never shown in reprs.
    password: bytes = field(default=b"", repr=False)
    deletion_at_batch_index_level_enabled: bool = True
    #: Called around every add and metadata update (``ManagedLedgerConfig.setManagedLedgerInterceptor``);
    #: the broker's PIP-70 interceptors implement it (:func:`pulsarkit.broker.interceptors.managed_ledger_interceptor`).
    #: Like Pulsar's, one interceptor instance belongs to one managed ledger.
    managed_ledger_interceptor: ManagedLedgerInterceptor | None = None
    #: Extra ledger custom metadata (bytes values), merged over Pulsar's base map.
    ledger_metadata: Mapping[str, bytes] = field(default_factory=dict)
    #: Verify bookie digests on read.
    verify_digest: bool = True
    #: Clock in ms; defaults to the store's.
    clock: Callable[[], int] | None = None
    #: 0..1 fraction of jitter added to ``maximum_rollover_time_ms`` (Pulsar: up to 5 %).
    rollover_jitter: float = 0.05


def ledger_custom_metadata(ml_name: str, extra: Mapping[str, bytes] | None = None) -> dict[str, bytes]:
    """``LedgerMetadataUtils.buildBaseManagedLedgerMetadata``: what every data ledger carries."""
    md = {"application": b"pulsar", "component": b"managed-ledger", "pulsar/managed-ledger": ml_name.encode()}
    md.update({k: bytes(v) for k, v in (extra or {}).items()})
    return md


__all__ = ["MB", "ManagedLedgerConfig", "ledger_custom_metadata"]
