"""Host-side performance strategies for vLLM, applied inside every engine process.

Public names: :class:`Strategy`, :class:`Param`, :class:`Role`, :class:`Applicability`,
:class:`ProcessContext`, and :func:`strategy_classes` / :func:`get` from the registry.
"""

from strategies.framework.base import Applicability, Param, ProcessContext, Role, Strategy
from strategies.framework.registry import ENTRY_POINT_GROUP, get, strategy_classes

__all__ = [
    "ENTRY_POINT_GROUP",
    "Applicability",
    "Param",
    "ProcessContext",
    "Role",
    "Strategy",
    "get",
    "strategy_classes",
]
