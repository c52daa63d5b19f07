"""fast_teardown without an engine: what its exit hook does to a process's collector (in a child interpreter, since
it changes how the process ends), and where it is refused. Its effect on a real engine's stop is in
tests/engine/test_restart_pairs_engine.py."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from strategies.fast_teardown import FastTeardown
from strategies.framework.base import ProcessContext, Role
from tests.support import TINY_ENGINE
from tuner.vllm.arguments import engine_config, resolve_engine_args


def _child(*parts: str) -> str:
    """Run ``parts`` in a fresh interpreter after a strategy is made as ``s``; its standard output."""
    script = "from strategies import ProcessContext, Role\nfrom strategies.fast_teardown import FastTeardown\n"
    script += "import atexit, gc\ns = FastTeardown()\n" + "".join(textwrap.dedent(part) for part in parts)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    return done.stdout


EXIT_PROBE = """
    # Registered before the strategy applies, so atexit runs it after the strategy's hook (last in, first out):
    # it sees what finalization will see.
    atexit.register(lambda: print("frozen at exit", gc.get_freeze_count() > 0))
"""


def test_applied_it_freezes_the_heap_before_the_interpreter_exits() -> None:
    applied = "s.apply(ProcessContext(Role.FRONTEND), {})\nprint('frozen before', gc.get_freeze_count())\n"
    out = _child(EXIT_PROBE, applied)
    assert "frozen before 0" in out and "frozen at exit True" in out


def test_reverted_it_leaves_the_exit_alone() -> None:
    applied_and_reverted = "ctx = ProcessContext(Role.FRONTEND)\ns.apply(ctx, {})\ns.revert(ctx)\n"
    assert "frozen at exit False" in _child(EXIT_PROBE, applied_and_reverted)


def test_in_force_is_counted_only_where_its_hook_is_armed() -> None:
    strategy = FastTeardown()
    ctx = ProcessContext(Role.FRONTEND)
    assert strategy.verify(ctx) is None and "in_force" not in strategy.counters
    strategy.apply(ctx, {})
    try:
        assert strategy.verify(ctx) is None and strategy.counters["in_force"] == 1
    finally:
        strategy.revert(ctx)


def test_it_is_refused_where_an_engine_stop_ends_no_process(monkeypatch: pytest.MonkeyPatch) -> None:
    config, refused = engine_config(resolve_engine_args(TINY_ENGINE))
    assert refused is None
    assert FastTeardown().refuses(config) is None  # the CPU engine: EngineCore and its worker spawned
    monkeypatch.setenv("VLLM_WORKER_MULTIPROC_METHOD", "fork")  # vLLM's default on GPUs
    assert "leave through os._exit" in (FastTeardown().refuses(config) or "")
    monkeypatch.setenv("VLLM_WORKER_MULTIPROC_METHOD", "spawn")
    monkeypatch.setattr(config.parallel_config, "distributed_executor_backend", "ray")
    assert "outlive an engine stop" in (FastTeardown().refuses(config) or "")
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    assert "front-end process" in (FastTeardown().refuses(config) or "")
