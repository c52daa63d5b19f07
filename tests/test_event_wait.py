"""``event_wait`` without a GPU: the event class it puts in ``torch.cuda.Event``'s place (on a stand-in for the CUDA
event, which a CPU build cannot make), the runner's event it re-makes, and its refusals on real resolved configs."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import torch

from strategies.event_wait import EventWait
from strategies.framework.base import ProcessContext, Role
from tests.support import TINY_ENGINE
from tuner.vllm.arguments import engine_config, resolve_engine_args


class StandInEvent:
    """What ``torch.cuda.Event`` takes: made through ``__new__``, keeping its arguments."""

    def __new__(cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> Any:
        event = object.__new__(cls)
        event.args = {"enable_timing": enable_timing, "blocking": blocking, "interprocess": interprocess}
        return event


def test_vllms_blocking_events_spin_while_applied_and_block_again_once_reverted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(torch.cuda, "Event", StandInEvent)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    strategy = EventWait()
    strategy.install()
    strategy.install()  # idempotent: one subclass, not two
    assert torch.cuda.Event.__bases__ == (StandInEvent,)
    runner = SimpleNamespace(prepare_inputs_event=torch.cuda.Event(blocking=True))  # made at start, as vLLM does
    ctx = ProcessContext(Role.WORKER, owner=SimpleNamespace(model_runner=runner))
    assert runner.prepare_inputs_event.args["blocking"] is True and strategy.counters == {}

    strategy.apply(ctx, EventWait.resolve_params({"blocking": False}))
    assert runner.prepare_inputs_event.args["blocking"] is False  # re-made under the setting
    per_step = torch.cuda.Event(blocking=True)
    timing = torch.cuda.Event(enable_timing=True)  # not one vLLM makes blocking: as asked
    assert isinstance(per_step, StandInEvent) and per_step.args["blocking"] is False
    assert timing.args == {"enable_timing": True, "blocking": False, "interprocess": False}
    assert strategy.counters == {"events_remade": 1, "spinning_events": 2}  # the re-made one and the per-step one

    strategy.revert(ctx)
    assert runner.prepare_inputs_event.args["blocking"] is True and torch.cuda.Event(blocking=True).args["blocking"]
    assert strategy.counters["spinning_events"] == 2  # nothing counted once reverted


def test_without_cuda_installing_it_leaves_torch_alone() -> None:
    """vLLM's CPU runner makes its own stand-in events while it starts: a patched class there broke the start (an
    engine test in the GPU topology caught it), so without CUDA nothing is patched (and the strategy is refused)."""
    assert not torch.cuda.is_available()
    before = torch.cuda.Event
    EventWait().install()
    assert torch.cuda.Event is before


def test_refused_on_the_cpu_engine_and_on_the_v1_runner_without_async_scheduling() -> None:
    config, refused = engine_config(resolve_engine_args(TINY_ENGINE))
    assert refused is None
    assert EventWait().refuses(config) == "the cpu runner makes no CUDA events to wait on"

    def gpu(async_scheduling: bool, v2: bool) -> Any:
        return SimpleNamespace(
            device_config=SimpleNamespace(device_type="cuda"),
            scheduler_config=SimpleNamespace(async_scheduling=async_scheduling),
            use_v2_model_runner=v2,
        )

    assert "without async scheduling" in (EventWait().refuses(gpu(False, False)) or "")
    assert EventWait().refuses(gpu(True, False)) is None and EventWait().refuses(gpu(False, True)) is None
