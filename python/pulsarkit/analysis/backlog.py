"""A subscription's backlog: exactly the messages a consumer re-attaching to it would receive.

From the cursor as the broker recovers it (``ManagedCursorInfo``, or the last ``PositionInfo`` of the
cursor ledger): entries after the mark-delete position, minus individually deleted ranges; of a
partly acknowledged batch only the indexes its ack set still marks (a set bit = not acknowledged, as
the broker sends ``ack_set`` and the client filters). Markers, aborted and unfinished transactions
are not delivered (read-committed), chunks are reassembled from the chunks still unacknowledged.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from .datadir import Cursor, DataDir, Position
from .messages import iter_messages, message_batches, message_schema


def iter_backlog(
    dd: DataDir, topic: str, subscription: str, *, txn: str = "committed"
) -> Iterator[dict[str, Any]]:
    """Records (as :func:`pulsarkit.analysis.messages.iter_messages`) of the subscription's backlog."""
    c: Cursor = dd.cursor(topic, subscription)

    def keep(pos: Position, batch_size: int) -> set[int] | None:
        if pos not in c.batch_ack_sets:
            return None
        return set(c.unacked_batch_indexes(pos, batch_size))

    yield from iter_messages(
        dd, c.managed_ledger, txn=txn, start=c.mark_delete, skip_entry=c.is_deleted, batch_filter=keep
    )


def backlog_table(dd: DataDir, topic: str, subscription: str, *, txn: str = "committed") -> Any:

    return pa.Table.from_batches(
        list(message_batches(iter_backlog(dd, topic, subscription, txn=txn))), schema=message_schema()
    )
