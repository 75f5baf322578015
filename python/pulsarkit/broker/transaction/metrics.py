"""The buffered writer's Prometheus metrics (``TxnLogBufferedWriterMetricsStats``), with Pulsar's names
and buckets: ``<prefix>_bufferedwriter_batch_records``, ``..._batch_size_bytes``,
``..._batch_oldest_record_delay_seconds`` (histograms) and ``..._flush_trigger_{max_records,max_size,
max_delay,large_data}`` (counters, exported with ``_total``), labelled by ``broker``. The prefix is
``pulsar_txn_tc`` for the coordinator log and ``pulsar_txn_pending_ack_store`` for pending-ack stores.
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported by the first writer that records metrics (0.03 s no read needs)
    from prometheus_client import CollectorRegistry

COORDINATOR_PREFIX = "pulsar_txn_tc"
PENDING_ACK_STORE_PREFIX = "pulsar_txn_pending_ack_store"
RECORDS_BUCKETS = (10, 50, 100, 200, 500, 1000)
BYTES_BUCKETS = (128, 512, 1024, 2048, 4096, 16384, 102400, 1232896)
DELAY_BUCKETS = (1, 5, 10)
TRIGGERS = ("max_records", "max_size", "max_delay", "large_data")

# One set of collectors per (registry, prefix): writers of the same kind share them, each with its
# own label values, as Pulsar's writers share one static holder.
# Keyed by the registry object itself (weakly): an id() could be reused by a new registry.
_collectors: weakref.WeakKeyDictionary[CollectorRegistry, dict[str, dict[str, Any]]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def _shared(registry: CollectorRegistry, prefix: str) -> dict[str, Any]:
    from prometheus_client import Counter, Histogram

    with _lock:
        per_registry = _collectors.setdefault(registry, {})
        c = per_registry.get(prefix)
        if c is None:
            p = f"{prefix}_bufferedwriter"
            labels = ["broker"]
            c = {
                "records": Histogram(
                    f"{p}_batch_records", "Records per batch", labels, buckets=RECORDS_BUCKETS, registry=registry
                ),
                "bytes": Histogram(
                    f"{p}_batch_size_bytes", "Bytes per batched entry", labels, buckets=BYTES_BUCKETS, registry=registry
                ),
                "delay": Histogram(
                    f"{p}_batch_oldest_record_delay_seconds",
                    "Time the oldest record of a batch waited",
                    labels,
                    buckets=DELAY_BUCKETS,
                    registry=registry,
                ),
            }
            for t in TRIGGERS:
                c[t] = Counter(f"{p}_flush_trigger_{t}", f"Flushes triggered by {t}", labels, registry=registry)
            per_registry[prefix] = c
        return c


class TxnLogBufferedWriterMetricsStats:
    """The metrics of one writer (one label value). Nothing is recorded for a writer with batching
    off; the large record itself is never observed, only the flush of the pending batch before it."""

    def __init__(self, prefix: str, broker: str = "standalone", registry: CollectorRegistry | None = None) -> None:
        self.prefix = prefix
        self.broker = broker
        if registry is None:
            import prometheus_client

            registry = prometheus_client.REGISTRY
        self._c = _shared(registry, prefix)

    def trigger_flush(self, trigger: str, records: int, size_bytes: int, oldest_delay_ms: int) -> None:
        self._c["records"].labels(self.broker).observe(records)
        self._c["bytes"].labels(self.broker).observe(size_bytes)
        self._c["delay"].labels(self.broker).observe(oldest_delay_ms / 1000)
        self._c[trigger].labels(self.broker).inc()

    def close(self) -> None:
        """Drops this writer's label values, as Pulsar's ``close()`` does (the series go back to nothing)."""
        for c in self._c.values():
            try:
                c.remove(self.broker)
            except KeyError:
                pass


__all__ = [
    "COORDINATOR_PREFIX",
    "PENDING_ACK_STORE_PREFIX",
    "TRIGGERS",
    "TxnLogBufferedWriterMetricsStats",
]
