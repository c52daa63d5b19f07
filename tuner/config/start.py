"""What an engine start changes from the experiment's: the one type for a sweep trial's configuration and for each
arm of a restart pair (kept apart from the pairing, which needs an engine, so the study's readers do not)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class StartConfig:
    """What an engine start of one arm changes from the experiment's: engine args, vLLM environment variables, and
    the strategies in force from the start (as a deployment's ``TUNER_PLUGIN`` has them)."""

    engine: dict[str, Any] = field(default_factory=dict)
    env: dict[str, Any] = field(default_factory=dict)
    strategies: dict[str, dict[str, Any]] = field(default_factory=dict)
