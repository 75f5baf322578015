"""pulsarkit's exceptions. All derive from :class:`PulsarkitError`, itself a ``ValueError``.

Errors about bytes carry ``offset`` (from the start of the buffer passed in); checksum errors also
carry ``stored`` and ``computed``.
"""

from ._native import (
    ChecksumMismatchError,
    CorruptEntryError,
    CorruptFrameError,
    DecompressionError,
    LimitExceededError,
    PulsarkitError,
    UnsupportedCompressionError,
)

__all__ = [
    "ChecksumMismatchError",
    "CorruptEntryError",
    "CorruptFrameError",
    "DecompressionError",
    "LimitExceededError",
    "PulsarkitError",
    "UnsupportedCompressionError",
]
