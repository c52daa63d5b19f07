"""The tuner's code inside every vLLM process, loaded by vLLM through the ``vllm.general_plugins`` entry point.

vLLM calls :func:`register` in process 0, in EngineCore and in every worker (spawned or forked). It does
nothing unless the environment variable ``TUNER_PLUGIN`` holds a JSON spec::

    {"strategies": {"gc_threshold": {"gen0_per_seq": 8}},   # applied when each process is ready
     "install": ["gc_freeze"]}                                # also patched, so it can be switched on later

With a spec it installs the GC probe, hooks the points where each process becomes ready (front-end engine
built, EngineCore built, worker warmed up), applies the requested strategies there, and adds the control
method ``tuner_control`` to ``EngineCore`` (a utility call) and to the worker base class (``collective_rpc``)
so that a running engine can be asked for telemetry and switched between strategy sets.

To enable a strategy set in production ``vllm serve``, install this package and export the same variable::

    TUNER_PLUGIN='{"strategies": {"gc_threshold": {"gen0_per_seq": 8}}}' vllm serve MODEL

The tuner side imports only :mod:`tuner.plugin.protocol` from here; this module loads the rest only when vLLM
calls the entry point.
"""

from __future__ import annotations

__all__ = ["register"]


def register() -> None:
    """vLLM entry point (``vllm.general_plugins``); see :func:`tuner.plugin.process.register`."""
    from tuner.plugin.process import register as register_in_process

    register_in_process()
