"""The one shape of every maintenance operation: plan, dry run, execute.

Retention (:mod:`pulsarkit.managed_ledger.trim`), TTL (:mod:`pulsarkit.broker.expiry`), bookie GC
(:mod:`pulsarkit.bookkeeper.gc`, many bookies in :mod:`pulsarkit.bookkeeper.gc_cluster`), orphan
cleanup (:mod:`pulsarkit.analysis.orphans`, :mod:`pulsarkit.analysis.orphan_cleanup`) and topic
compaction (:mod:`pulsarkit.broker.compaction`) each have

* ``plan(...)``: pure, returns a frozen :class:`Plan` subclass: the items it will act on, each with a
  ``reason``, the ``state`` it was made on and when (``created_ms``);
* a dry run, which is the plan alone (nothing is read again, nothing written);
* ``execute(plan, ...)``: re-checks the state the plan was made on (a plan made on another state is
  refused with :class:`~pulsarkit.errors.StalePlanError`, or, where the operation works item by item,
  the item is skipped and said so), applies it, and returns a typed result.

A plan is plain data: :meth:`Plan.to_json` writes it for review (a ``kind`` and a ``format_version``
beside its fields) and :meth:`Plan.from_json` reads it back, checking every field against the
dataclass's types: a malformed, truncated or tampered file gives a
:class:`~pulsarkit.errors.PlanFormatError` naming the field, never a ``KeyError`` or ``TypeError``.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from typing import Any, ClassVar, TypeVar, Union

from .errors import PlanFormatError

#: Bumped when a plan's JSON changes incompatibly; older files are refused, not misread.
FORMAT_VERSION = 1
#: Deeper JSON is no plan (the deepest plan is a handful of levels); refused before the decoder recurses.
MAX_DEPTH = 32

P = TypeVar("P", bound="Plan")

_KINDS: dict[str, type[Plan]] = {}


@dataclasses.dataclass(frozen=True)
class PlanItem:
    """One thing a plan acts on. Subclasses are frozen dataclasses with a ``reason: str`` field (or
    property). (Annotating it here would put it first in every subclass's fields.)"""


@dataclasses.dataclass(frozen=True)
class Skipped:
    """A plan item an item-by-item ``execute`` (bookie GC, orphan cleanup) left alone, and why: the state
    moved on since the plan. ``kind`` says what ``id`` names (``ledger``, ``log``, ``compaction``)."""

    kind: str
    id: int
    why: str


@dataclasses.dataclass(frozen=True)
class Plan:
    """Base of every plan: a frozen dataclass whose subclasses set ``KIND`` and declare ``state`` (the
    fingerprint of what the plan was made on) and ``created_ms``; ``items`` (a field or a property)
    lists what it acts on, each with a reason."""

    # ``items``, ``state`` and ``created_ms`` are not annotated here: a base annotation, even a ClassVar,
    # would fix their place among the subclass's fields.
    KIND: ClassVar[str] = ""

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if cls.KIND:
            _KINDS[cls.KIND] = cls

    @property
    def kind(self) -> str:
        return self.KIND

    def reasons(self) -> list[str]:
        """Each item's reason, in order."""
        return [it.reason for it in self.items]  # type: ignore[attr-defined]

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.KIND, "format_version": FORMAT_VERSION, **_encode(self)}

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, indent=indent)

    @classmethod
    def from_dict(cls: type[P], doc: Any) -> P:
        """A plan from its :meth:`to_dict` form: :class:`PlanFormatError` unless every field is there
        with its type (``Plan.from_dict`` takes any kind whose module is imported)."""
        _check_depth(doc)
        if not isinstance(doc, dict):
            raise PlanFormatError(f"a plan is a JSON object, not {_json_type(doc)}", "")
        kind = doc.get("kind")
        if cls.KIND:
            if kind != cls.KIND:
                raise PlanFormatError(f"not a {cls.KIND!r} plan (its kind is {kind!r})", "kind")
            target: type[Plan] = cls
        else:
            if not isinstance(kind, str) or kind not in _KINDS:
                raise PlanFormatError(f"unknown plan kind {kind!r}", "kind")
            target = _KINDS[kind]
        version = doc.get("format_version")
        if version != FORMAT_VERSION:
            raise PlanFormatError(
                f"plan format version {version!r} is not the one this pulsarkit reads ({FORMAT_VERSION})",
                "format_version",
            )
        body = {k: v for k, v in doc.items() if k not in ("kind", "format_version")}
        return typing.cast(P, _decode(target, body, ""))

    @classmethod
    def from_json(cls: type[P], text: str | bytes) -> P:
        try:
            doc = json.loads(text, parse_constant=_no_constant)
        except RecursionError:
            raise PlanFormatError("the plan nests too deeply to be a plan") from None
        except (ValueError, TypeError) as e:  # JSONDecodeError, bad UTF-8
            raise PlanFormatError(f"the plan is not valid JSON: {e}") from None
        return cls.from_dict(doc)

    def write(self, path: str) -> None:
        with open(path, "w") as f:
            f.write(self.to_json(indent=1))

    @classmethod
    def read(cls: type[P], path: str) -> P:
        """A plan from a file (:class:`PlanFormatError` also when it cannot be read)."""
        try:
            with open(path, "rb") as f:
                text = f.read()
        except OSError as e:
            raise PlanFormatError(f"{path}: cannot read the plan: {e.strerror or e}") from None
        try:
            return cls.from_json(text)
        except PlanFormatError as e:
            raise PlanFormatError(f"{path}: {e}", e.field) from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number a plan holds")  # NaN, Infinity: Python's JSON extensions


# ------------------------------------------------------------------------------------ encoding


def to_data(v: Any) -> Any:
    """A plan, an item or a result as plain JSON data (dataclasses as objects, tuples as arrays)."""
    return _encode(v)


def _encode(v: Any) -> Any:
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: _encode(getattr(v, f.name)) for f in dataclasses.fields(v)}
    if isinstance(v, tuple):  # Position and other NamedTuples: a JSON array
        return [_encode(x) for x in v]
    if isinstance(v, list):
        return [_encode(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _encode(x) for k, x in v.items()}
    return v


# ------------------------------------------------------------------------------------ decoding


def _json_type(v: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(v), "a number"
    )


def _check_depth(doc: Any) -> None:
    stack = [(doc, 0)]
    while stack:
        v, d = stack.pop()
        if d > MAX_DEPTH:
            raise PlanFormatError("the plan nests too deeply to be a plan")
        if isinstance(v, dict):
            stack.extend((x, d + 1) for x in v.values())
        elif isinstance(v, list):
            stack.extend((x, d + 1) for x in v)


def _hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except NameError as e:  # an annotation only importable under TYPE_CHECKING: a bug, not bad input
        raise TypeError(f"{cls.__name__}'s annotations must resolve at run time: {e}") from None


def _is_namedtuple(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, tuple) and hasattr(t, "_fields")


def _bad(path: str, want: str, v: Any) -> PlanFormatError:
    return PlanFormatError(f"plan field {path or '(top)'}: expected {want}, got {_json_type(v)}", path)


def _decode(t: Any, v: Any, path: str) -> Any:
    origin = typing.get_origin(t)
    if t is Any:
        return v
    if origin in (Union, types.UnionType):
        args = typing.get_args(t)
        if v is None and type(None) in args:
            return None
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return _decode(a, v, path)
            except PlanFormatError as e:
                errors.append(e)
        raise errors[0] if len(errors) == 1 else _bad(path, " or ".join(map(_name, args)), v)
    if origin is typing.Literal:
        if v not in typing.get_args(t):
            raise PlanFormatError(f"plan field {path}: {v!r} is not one of {typing.get_args(t)}", path)
        return v
    if t is bool:
        if not isinstance(v, bool):
            raise _bad(path, "a boolean", v)
        return v
    if t is int:
        if not isinstance(v, int) or isinstance(v, bool):
            raise _bad(path, "an integer", v)
        return v
    if t is float:
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            raise _bad(path, "a number", v)
        return float(v)
    if t is str:
        if not isinstance(v, str):
            raise _bad(path, "a string", v)
        return v
    if origin is list or origin is tuple and typing.get_args(t)[-1:] == (...,):
        if not isinstance(v, list):
            raise _bad(path, "an array", v)
        (a, *_) = typing.get_args(t)
        out = [_decode(a, x, f"{path}[{i}]") for i, x in enumerate(v)]
        return out if origin is list else tuple(out)
    if origin is dict:
        if not isinstance(v, dict):
            raise _bad(path, "an object", v)
        kt, vt = typing.get_args(t)
        res = {}
        for k, x in v.items():
            sub = f"{path}.{k}" if path else str(k)
            if kt is int:
                try:
                    key: Any = int(k)
                except ValueError:
                    raise PlanFormatError(f"plan field {sub}: the key {k!r} is not an integer", sub) from None
            else:
                key = k
            res[key] = _decode(vt, x, sub)
        return res
    if _is_namedtuple(t):
        hints = _hints(t)
        if not isinstance(v, list) or len(v) != len(t._fields):
            raise _bad(path, f"an array of {len(t._fields)}", v)
        return t(*(_decode(hints[n], x, f"{path}[{i}]") for i, (n, x) in enumerate(zip(t._fields, v, strict=True))))
    if dataclasses.is_dataclass(t) and isinstance(t, type):
        if not isinstance(v, dict):
            raise _bad(path, "an object", v)
        hints = _hints(t)
        kwargs = {}
        names = set()
        for f in dataclasses.fields(t):
            names.add(f.name)
            sub = f"{path}.{f.name}" if path else f.name
            if f.name not in v:
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                    raise PlanFormatError(
                        f"plan field {sub} is missing (a plan from another version of pulsarkit? make it again)", sub
                    )
                continue
            kwargs[f.name] = _decode(hints[f.name], v[f.name], sub)
        extra = sorted(set(v) - names)
        if extra:
            sub = f"{path}.{extra[0]}" if path else extra[0]
            raise PlanFormatError(f"plan field {sub} is not a field of {t.__name__}", sub)
        try:
            return t(**kwargs)
        except (TypeError, ValueError) as e:  # a __post_init__ that refuses the values
            raise PlanFormatError(f"plan field {path or '(top)'}: {e}", path) from None
    raise TypeError(f"plans cannot hold a {t!r}")  # a plan class's own mistake, found by the round-trip tests


def _name(t: Any) -> str:
    return getattr(t, "__name__", str(t))


__all__ = ["FORMAT_VERSION", "MAX_DEPTH", "Plan", "PlanItem", "Skipped", "to_data"]
