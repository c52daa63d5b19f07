"""What strategies are built on (not strategies themselves): the contract (``base``), the registry, the vLLM source
they need (``requirements``, ``call_sites``, read by ``source_tree``), install-once patches (``patches``), GC-threshold
helpers (``thresholds``) and wait points (``wait_points``).

Public names: what the tuner, the plugin's hooks and the tests use; strategies import the modules themselves.
"""

from strategies.framework import registry, wait_points
from strategies.framework.base import ProcessContext, Role
from strategies.framework.requirements import (
    TESTED_VLLM,
    Absent,
    AssignedIn,
    Defined,
    OpenDataclass,
    Order,
    Params,
    Requirement,
    Snippet,
    unmet,
)
from strategies.framework.source_tree import admits, installed_root, source_version

__all__ = [
    "TESTED_VLLM",
    "Absent",
    "AssignedIn",
    "Defined",
    "OpenDataclass",
    "Order",
    "Params",
    "ProcessContext",
    "Requirement",
    "Role",
    "Snippet",
    "admits",
    "installed_root",
    "registry",
    "source_version",
    "unmet",
    "wait_points",
]
