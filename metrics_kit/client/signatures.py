"""Functions made from one definition that still show their real signature (Shift-Tab, help()).

The family helpers, the Client's family methods and the module-level functions over the default
client are each generated from one function; this gives every generated one the parameters it
really takes (with their defaults and annotations) and the docstring of what it wraps.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any


def presented(
    call: Callable[..., Any], like: Callable[..., Any], *, drop: str, name: str, doc: str | None, module: str
) -> Callable[..., Any]:
    """``call``, shown with ``like``'s signature less the parameter ``drop``; arguments that do not
    fit that signature are a TypeError naming the function, before ``call`` runs."""
    signature = inspect.signature(like)
    shown = signature.replace(parameters=[p for p in signature.parameters.values() if p.name != drop])

    def function(*args: Any, **kwargs: Any) -> Any:
        try:
            shown.bind(*args, **kwargs)
        except TypeError as error:
            raise TypeError(f"{name}(): {error}") from None
        return call(*args, **kwargs)

    function.__signature__ = shown  # type: ignore[attr-defined]
    function.__name__ = function.__qualname__ = name
    function.__doc__ = doc
    function.__module__ = module
    return function
