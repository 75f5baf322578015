"""Helpers for people who test against Pulsar.

* :mod:`pulsarkit.testing.compaction` (in the wheel): expected ``readCompacted`` answers for any
  compacted topic you build, also as the ``compacted_topic_oracle`` pytest fixture.
* :mod:`pulsarkit.testing.fake_broker` (repository only, not in the wheel): an in-process fake broker
  that real clients talk to, storing through pulsarkit's ``PersistentTopic``.
"""

from .compaction import CompactedTopicOracle, ExpectedMessage

__all__ = ["CompactedTopicOracle", "ExpectedMessage"]
