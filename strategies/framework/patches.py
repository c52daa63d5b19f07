"""Install-once patches: the wrappers a strategy puts in place of vLLM attributes, set once per process.

:meth:`Strategy.install` runs at every plugin load and must be idempotent. A strategy never unpatches: its
wrappers stay for the life of the process and read its state, which ``apply`` and ``revert`` switch, so the same
wrapper serves every arm (and every step of a step-level comparison).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Wrap = Callable[[Any], Any]
"""Makes what replaces an attribute from the attribute's original value."""
Patch = tuple[Any, str, Wrap]
"""``(owner, attribute, wrap)``: ``owner.attribute`` becomes ``wrap(original)``."""


class Patches:
    """The patches one strategy instance installs: all of them, once."""

    def __init__(self) -> None:
        self._installed = False

    def install(self, *patches: Patch, setter: Callable[[Any, str, Any], None] = setattr) -> None:
        """Set each ``owner.attribute`` to ``wrap(original)`` through ``setter``, on the first call only. Every
        replacement is made before any is set, so a wrap that raises (vLLM's code changed) patches none of them."""
        if self._installed:
            return
        replacements = [(owner, attribute, wrap(getattr(owner, attribute))) for owner, attribute, wrap in patches]
        for owner, attribute, replacement in replacements:
            setter(owner, attribute, replacement)
        self._installed = True


def calling_before(hook: Callable[[], None]) -> Wrap:
    """A wrap whose replacement calls ``hook()``, then the original with the caller's arguments."""

    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        def before(*args: Any, **kwargs: Any) -> Any:
            hook()
            return original(*args, **kwargs)

        return before

    return wrap


def calling_after(hook: Callable[[], None]) -> Wrap:
    """A wrap whose replacement calls the original with the caller's arguments, then ``hook()``."""

    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        def after(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            hook()
            return result

        return after

    return wrap
