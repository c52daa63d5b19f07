"""Find strategies: the built-ins plus any registered under the ``tuner.strategies`` entry-point group.

A third-party package adds one with::

    [project.entry-points."tuner.strategies"]
    my_strategy = "my_pkg.module:MyStrategy"     # a Strategy subclass
"""

from __future__ import annotations

import logging
from functools import cache
from importlib.metadata import entry_points

from strategies.framework.base import Strategy

ENTRY_POINT_GROUP = "tuner.strategies"
logger = logging.getLogger(__name__)


def _builtin() -> list[type[Strategy]]:
    from strategies.event_wait import EventWait
    from strategies.fast_teardown import FastTeardown
    from strategies.gc_freeze import GcFreeze
    from strategies.gc_in_waits import GcInWaits
    from strategies.gc_refreeze import GcRefreeze
    from strategies.gc_threshold import GcThreshold
    from strategies.known_delay import KnownDelay
    from strategies.known_gc_load import KnownGcLoad
    from strategies.known_stall import KnownStall
    from strategies.ndarray_outputs import NdarrayOutputs
    from strategies.sampler_copy_elision import SamplerCopyElision
    from strategies.shared_empty_kv_blocks import SharedEmptyKvBlocks
    from strategies.shm_spin_window import ShmSpinWindow

    return [
        GcThreshold,
        GcFreeze,
        GcRefreeze,
        GcInWaits,
        NdarrayOutputs,
        SharedEmptyKvBlocks,
        SamplerCopyElision,
        ShmSpinWindow,
        EventWait,
        FastTeardown,
        KnownDelay,
        KnownGcLoad,
        KnownStall,
    ]


@cache
def strategy_classes() -> dict[str, type[Strategy]]:
    """All known strategy classes by name; entry points cannot shadow a built-in."""
    found = {cls.name: cls for cls in _builtin()}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            cls = ep.load()
        except Exception as exc:  # a broken third-party plugin must not take the tuner down
            logger.warning("cannot load strategy entry point %s: %s", ep.value, exc)
            continue
        if not (isinstance(cls, type) and issubclass(cls, Strategy)):
            logger.warning("entry point %s is not a Strategy subclass; ignored", ep.value)
            continue
        if cls.name in found:
            logger.warning("entry point %s reuses the name %r; ignored", ep.value, cls.name)
            continue
        found[cls.name] = cls
    return found


@cache
def get(name: str) -> Strategy:
    """The one per-process instance of strategy ``name`` (``KeyError`` when unknown)."""
    return strategy_classes()[name]()
