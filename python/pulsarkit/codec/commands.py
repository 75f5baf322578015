"""Pulsar command frames: ``[u32 total][u32 cmd_size][BaseCommand][headersAndPayload?]``."""

from __future__ import annotations

from typing import Any

from google.protobuf.message import DecodeError

from .. import _native
from ..errors import CorruptFrameError
from ..proto import COMMAND_FIELD, BaseCommand, CommandType
from .entry import Buffer

DEFAULT_MAX_FRAME_SIZE: int = _native.DEFAULT_MAX_FRAME_SIZE


def encode_command(command: Any, headers_and_payload: Buffer | None = None) -> bytes:
    """Frames a BaseCommand, appending ``headers_and_payload`` (for SEND and MESSAGE) when given."""
    return _native.encode_frame(command.SerializeToString(), headers_and_payload)


def command(type_name: str, **fields: Any) -> Any:
    """Builds a BaseCommand: ``command("SEND", producer_id=1, sequence_id=0)``."""
    t = CommandType[type_name]
    cmd = BaseCommand(type=t)
    sub = getattr(cmd, COMMAND_FIELD[t])
    for k, v in fields.items():
        f = getattr(sub, k)
        if hasattr(f, "CopyFrom") and not isinstance(v, (int, str, bytes, bool)):
            if isinstance(v, dict):
                for kk, vv in v.items():
                    setattr(f, kk, vv)
            else:
                f.CopyFrom(v)
        else:
            setattr(sub, k, v)
    sub.SetInParent()
    return cmd


class FrameDecoder:
    """Incrementally splits a connection's byte stream into ``(BaseCommand, headersAndPayload | None)``.

    Accepts any split of the stream. Frames above ``max_frame_size`` (default: 5 MiB + 10 KiB, as the
    broker) and malformed frames raise :class:`CorruptFrameError`/:class:`LimitExceededError`; after
    that the decoder stays failed, as the stream position is lost.
    """

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self._raw = _native.RawFrameDecoder(max_frame_size)
        self._offset = 0
        self._failed: CorruptFrameError | None = None

    def feed(self, data: Buffer) -> list[tuple[Any, bytes | None]]:
        if self._failed is not None:
            raise self._failed
        out: list[tuple[Any, bytes | None]] = []
        for cmd_bytes, hp in self._raw.feed(data):
            cmd = BaseCommand()
            try:
                cmd.ParseFromString(cmd_bytes)
                if not cmd.IsInitialized():  # upb parses proto2 without checking required fields
                    raise DecodeError(f"missing required field(s) {', '.join(cmd.FindInitializationErrors())}")
            except DecodeError as e:
                err = CorruptFrameError(f"frame at stream offset {self._offset}: invalid BaseCommand: {e}")
                err.offset = self._offset
                # Like the native decoder: stay failed, and deliver the good frames before the bad one
                # first (the error comes with the next feed), so every split yields the same frames.
                self._failed = err
                if out:
                    return out
                raise err from e
            self._offset += 8 + len(cmd_bytes) + (len(hp) if hp else 0)
            out.append((cmd, hp))
        return out

    @property
    def buffered(self) -> int:
        """Bytes received that do not yet form a complete frame."""
        return self._raw.buffered

    def __iter__(self) -> Any:
        raise TypeError("FrameDecoder is fed with .feed(data); it is not iterable")
