"""A test-only vLLM plugin: an install that is slower by a known host delay.

With ``TUNER_TEST_HOST_DELAY_MS`` set, every EngineCore scheduling step busy-waits that long. A test virtualenv
that sets the variable itself (a ``.pth`` line) is then "a vLLM install with a known host-side regression" for
``tuner versions``, while an otherwise identical virtualenv without it is the unchanged install.
"""

from __future__ import annotations

import os

from tuner_test_plugin import delay_scheduler_steps

ENV_VAR = "TUNER_TEST_HOST_DELAY_MS"
_installed = False


def register() -> None:
    """``vllm.general_plugins`` entry point: delay the scheduler once per process when asked."""
    global _installed
    delay_ms = float(os.environ.get(ENV_VAR) or 0)
    if delay_ms <= 0 or _installed:
        return
    delay_scheduler_steps(lambda: delay_ms / 1e3)
    _installed = True
