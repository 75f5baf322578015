"""One lock per managed ledger, shared by its cursors: what makes a managed ledger safe to use from
several threads (concurrent adds get distinct, consecutive positions)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def synchronized(method: F) -> F:
    """Runs a method of a managed ledger, or of one of its cursors (``self.ml``), under the managed
    ledger's reentrant ``lock``."""

    @functools.wraps(method)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        with getattr(self, "ml", self).lock:
            return method(self, *args, **kwargs)

    return run  # type: ignore[return-value]


__all__ = ["synchronized"]
