"""pytest fixtures of pulsarkit, registered automatically when pulsarkit is installed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .compaction import CompactedTopicOracle


@pytest.fixture
def compacted_topic_oracle() -> Iterator[CompactedTopicOracle]:
    """A fresh :class:`~pulsarkit.testing.compaction.CompactedTopicOracle`: build a topic, compact it,
    and get the messages, last message id and ``hasMessageAvailable`` answers a ``readCompacted``
    reader must see."""
    with CompactedTopicOracle() as oracle:
        yield oracle
