"""The one name a configuration has in every series: its canonical settings, whatever the order of keys."""

from __future__ import annotations

import json
from collections.abc import Mapping


def config_name(strategies: Mapping[str, object] | None, engine: Mapping[str, object] | None) -> str:
    """A configuration's stable name from its canonical settings: strategies by name, then engine overrides.

    ``{"shared_empty_kv_blocks": {"enabled": False}, "gc_threshold": {"gen0_per_seq": 64}}`` gives
    ``gc_threshold(gen0_per_seq=64)+shared_empty_kv_blocks(enabled=false)`` in every sweep, whatever the order
    of trials or keys, so one dashboard series follows one configuration.
    """
    parts = [
        _call(name, params if isinstance(params, Mapping) else {})
        for name, params in sorted((strategies or {}).items())
    ]
    if engine:
        parts.append(_call("engine", engine))
    return "+".join(parts) or "vllm-as-installed"


def _call(name: str, params: Mapping[str, object]) -> str:
    args = ",".join(
        f"{key}={value if isinstance(value, str) else json.dumps(value)}" for key, value in sorted(params.items())
    )
    return f"{name}({args})" if args else name
