"""The plugin's state in one process: a second engine with a new spec must not inherit the first one's."""

from __future__ import annotations

import asyncio
import gc
import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from strategies import Role
from tuner.plugin import process as plugin
from tuner.plugin import protocol
from tuner.plugin.protocol import ENV_VAR, encode_spec


def test_a_new_spec_in_the_same_process_replaces_and_reverts_the_old(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plugin, "_state", None)
    frozen_before = gc.get_freeze_count()
    monkeypatch.setenv(ENV_VAR, encode_spec({"gc_freeze": {"enabled": True}}))
    plugin.register()
    first = plugin.state()
    assert first is not None
    try:
        first.on_ready(Role.FRONTEND, None, None)
        assert first.active == {"gc_freeze": {"enabled": True}}
        assert gc.get_freeze_count() > 0

        plugin.register()  # vLLM calling again with the same spec changes nothing
        assert plugin.state() is first

        monkeypatch.setenv(ENV_VAR, encode_spec({}, ["gc_threshold"]))
        plugin.register()
        second = plugin.state()
        assert second is not None and second is not first
        assert second.installable == ["gc_threshold"]
        assert first.active == {}
        assert gc.get_freeze_count() == frozen_before  # the first engine's freeze is undone
        assert first.probe._callback not in gc.callbacks
        assert second.probe._callback in gc.callbacks

        second.on_ready(Role.FRONTEND, None, None)
        second.switch({"gc_freeze": {"enabled": True}})
        assert second.errors["gc_freeze"].startswith("not installed at engine start")
    finally:
        current = plugin.state()
        if current is not None:
            current.retire()


class _Config:
    """The parts of a ``VllmConfig`` the strategies read."""

    def __init__(self, max_num_seqs: int) -> None:
        self.scheduler_config = type("SchedulerConfig", (), {"max_num_seqs": max_num_seqs})()


@pytest.fixture
def fresh_plugin(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(plugin, "_state", None)
    threshold = gc.get_threshold()
    yield
    current = plugin.state()
    if current is not None:
        current.retire()
    gc.set_threshold(*threshold)


def _front_end_with_gc_threshold(monkeypatch: pytest.MonkeyPatch) -> plugin.ProcessState:
    """The plugin registered with gc_threshold (8 per seq) and a front-end of max_num_seqs 16 ready."""
    monkeypatch.setenv(ENV_VAR, encode_spec({"gc_threshold": {"gen0_per_seq": 8}}))
    plugin.register()
    state = plugin.state()
    assert state is not None
    state.on_ready(Role.FRONTEND, _Config(16), object())
    return state


def test_a_forked_child_drops_the_parents_state_and_starts_its_own(
    monkeypatch: pytest.MonkeyPatch, fresh_plugin: None
) -> None:
    native = gc.get_threshold()
    parent = _front_end_with_gc_threshold(monkeypatch)  # the first engine of a sweep: max_num_seqs 16
    assert gc.get_threshold()[0] == 700 + 8 * 16
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child, as vLLM forks EngineCore on a GPU host: register() is not called again there
        child = plugin.state()
        seen = {
            "fresh": child is not None and child is not parent and child.pid == os.getpid(),
            "contexts": sorted(r.value for r in child.contexts) if child else None,
            "active": dict(child.active) if child else None,
            "threshold": gc.get_threshold()[0],
        }
        if child is not None:  # the child's own engine (a later one, with another max_num_seqs) becomes ready
            child.on_ready(Role.ENGINE_CORE, _Config(64), object())
        seen["after_ready"] = gc.get_threshold()[0]
        os.write(write, json.dumps(seen).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        seen = json.loads(pipe.read())
    os.waitpid(pid, 0)
    assert seen["fresh"] and seen["contexts"] == [] and seen["active"] == {}
    assert seen["threshold"] == native[0]  # the parent's threshold undone in the child
    assert seen["after_ready"] == 700 + 8 * 64  # not the first engine's max_num_seqs
    assert gc.get_threshold()[0] == 700 + 8 * 16  # the parent is untouched


def test_a_second_engine_in_one_process_reapplies_with_its_own_config(
    monkeypatch: pytest.MonkeyPatch, fresh_plugin: None
) -> None:
    state = _front_end_with_gc_threshold(monkeypatch)
    state.on_ready(Role.FRONTEND, _Config(256), object())  # same spec, new engine: a sweep over max_num_seqs
    assert gc.get_threshold()[0] == 700 + 8 * 256


@pytest.mark.parametrize("raw", ["{not json", "[1, 2]"])
def test_register_never_raises_into_vllm(monkeypatch: pytest.MonkeyPatch, fresh_plugin: None, raw: str) -> None:
    monkeypatch.setenv(ENV_VAR, raw)
    plugin.register()  # vLLM calls plugins without a try: raising here would stop a production engine
    assert plugin.state() is None


def test_a_failing_hook_is_reported_not_raised(monkeypatch: pytest.MonkeyPatch, fresh_plugin: None) -> None:
    monkeypatch.setenv(ENV_VAR, encode_spec({}))
    moved = ImportError("vllm moved a class")
    monkeypatch.setattr(plugin, "install_hooks", lambda current: (_ for _ in ()).throw(moved))
    plugin.register()
    state = plugin.state()
    assert state is not None
    report = state.report()
    assert "vllm moved a class" in report["errors"][protocol.PLUGIN_ERROR]
    from tuner.measure.workbench import inactive_strategies

    assert any("the tuner plugin failed" in p for p in inactive_strategies([report], {}))  # no measurement


def test_the_spec_reaches_ray_actors(monkeypatch: pytest.MonkeyPatch, fresh_plugin: None) -> None:
    monkeypatch.setenv(ENV_VAR, encode_spec({}))
    monkeypatch.setenv(plugin.RAY_COPY_VAR, "MY_VAR")
    plugin.register()
    assert os.environ[plugin.RAY_COPY_VAR].split(",") == ["MY_VAR", ENV_VAR]


class _DataParallelClient:
    """Shaped like vLLM's ``DPLBAsyncMPClient``: ``call_utility_async`` answers for engine 0 only."""

    core_engines = (b"\x00\x00", b"\x01\x00")

    async def call_utility_async(self, method: str, *args: Any) -> Any:
        return [{"rank": 0}]

    async def _call_utility_async(self, method: str, *args: Any, engine: bytes) -> Any:
        assert method == protocol.CONTROL_METHOD
        return [{"rank": int.from_bytes(engine, "little")}, {"rank": int.from_bytes(engine, "little"), "worker": 1}]


def test_control_reaches_every_data_parallel_rank() -> None:
    reports = asyncio.run(protocol.control_every_engine(_DataParallelClient(), {"op": "report"}))
    assert sorted(r["rank"] for r in reports) == [0, 0, 1, 1]


def test_a_strategy_whose_counters_did_not_move_is_not_active() -> None:
    from tuner.measure.workbench import StrategyNotActive, check_active

    report = {
        "pid": 7,
        "process_name": "EngineCore",
        "roles": ["engine_core"],
        "active": {"shared_empty_kv_blocks": {"enabled": True}},
        "errors": {},
        "counters": {"shared_empty_kv_blocks": {}},
    }
    requested = {"shared_empty_kv_blocks": {"enabled": True}}
    check_active([report], requested)  # reported active ...
    with pytest.raises(StrategyNotActive, match="its counters did not move"):
        check_active([report], requested, moved=True)  # ... but its path never ran during the repetition
    report["counters"] = {"shared_empty_kv_blocks": {"shared_empty": 3}}
    check_active([report], requested, moved=True)


def test_a_state_strategy_that_is_no_longer_in_force_stops_being_active(
    monkeypatch: pytest.MonkeyPatch, fresh_plugin: None
) -> None:
    state = _front_end_with_gc_threshold(monkeypatch)
    assert state.handle({"op": "reset"})["counters"]["gc_threshold"] == {"in_force": 1}
    gc.set_threshold(700)  # someone else (vLLM, a library) resets the threshold during the repetition
    report = state.handle({"op": "report"})
    assert "gc_threshold" not in report["active"] and "not the" in report["errors"]["gc_threshold"]


def test_telemetry_can_be_switched_off_and_on_to_measure_its_cost() -> None:
    state = plugin.ProcessState({"strategies": {}, "install": []})
    state.probe.install()
    try:
        off = state.handle({"op": "telemetry", "enabled": False})
        assert state.probe._callback not in gc.callbacks and not state.telemetry
        gc.collect()
        assert sum(state.handle({"op": "report"})["gc"]["collections"]) == sum(off["gc"]["collections"])
        state.handle({"op": "telemetry", "enabled": True})
        assert state.probe._callback in gc.callbacks and state.telemetry
    finally:
        state.probe.uninstall()


@pytest.mark.parametrize(("data", "message"), [([], "a JSON object"), ({"op": "explode"}, "unknown tuner control op")])
def test_a_control_request_from_json_needs_a_known_op(data: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        protocol.as_control_request(data)
    assert protocol.as_control_request({"op": "report"}) == protocol.REPORT


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("{", "not valid JSON"),
        ("[]", "must be a JSON object"),
        ('{"strategies": {"gc_threshold": 8}}', "strategies must map each name to its parameters"),
        ('{"install": "gc_threshold"}', "install must be a list of strategy names"),
    ],
)
def test_a_plugin_spec_that_is_not_one_is_refused_saying_why(raw: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        protocol.decode_spec(raw)


def test_a_plugin_spec_round_trips_with_its_control_endpoint() -> None:
    control: protocol.ControlEndpointSpec = {"token": "t", "port_file": "/tmp/p"}
    spec = protocol.decode_spec(encode_spec({"gc_threshold": {}}, ["gc_freeze"], control))
    assert spec == {"strategies": {"gc_threshold": {}}, "install": ["gc_freeze", "gc_threshold"], "control": control}
