"""End to end on the real vLLM CPU engine: metrics, per-process GC telemetry, every strategy.

One engine (the test session's, shared with the interleave tests) serves the whole module; strategies are
switched in place between repetitions, which is itself what the sweep relies on.
"""

from __future__ import annotations

from typing import Any

import pytest

from strategies import Role, strategy_classes
from tests.support import TINY_ENGINE
from tuner.config import Experiment
from tuner.engine.session import EngineSession
from tuner.measure.workbench import StrategyNotActive, Workbench, check_active, inactive_strategies

pytestmark = pytest.mark.engine

NUM_PROMPTS = 12
OUTPUT_LEN = 24


@pytest.fixture(scope="module")
def bench(engine_session: EngineSession) -> Workbench:
    experiment = Experiment.model_validate(
        {
            "name": "engine-test",
            "engine": TINY_ENGINE,
            "workload": {
                "num_prompts": NUM_PROMPTS,
                "input_len": {"dist": "uniform", "low": 4, "high": 20},
                "output_len": {"dist": "fixed", "value": OUTPUT_LEN},
                "seed": 3,
            },
            "measure": {"warmup_prompts": 4},
        }
    )
    workbench = Workbench(engine_session, experiment)
    workbench.warm_up()
    return workbench


@pytest.fixture(scope="module")
def reference(bench: Workbench) -> dict[str, Any]:
    bench.switch({})
    return bench.repetition()


def by_role(processes: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {role: p for p in processes for role in p["roles"]}


def test_metrics_are_plausible(reference: dict[str, Any]) -> None:
    m = reference["metrics"]
    assert m["completed"] == NUM_PROMPTS and m["failed"] == 0
    assert m["output_tokens"] == NUM_PROMPTS * OUTPUT_LEN
    assert all(len(ids) == OUTPUT_LEN for ids in reference["token_ids"])
    assert m["output_tokens_per_s"] > 0 and m["requests_per_s"] > 0
    assert m["total_tokens_per_s"] > m["output_tokens_per_s"]
    for family in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
        stats = m[family]
        assert 0 < stats["p50"] <= stats["p90"] <= stats["p99"], family
    assert m["ttft_ms"]["p50"] < m["e2e_ms"]["p50"]


def test_gc_telemetry_from_every_process(reference: dict[str, Any]) -> None:
    processes = reference["processes"]
    roles = by_role(processes)
    assert set(roles) == {"frontend", "engine_core", "worker"}  # the CPU default: three processes
    assert len({p["pid"] for p in processes}) == 3
    for proc in processes:
        gc = proc["gc"]
        assert len(gc["collections"]) == 3 and gc["window_s"] > 0
        assert sum(gc["pause_histogram"]["counts"]) == sum(gc["collections"])
        assert gc["peak_rss_bytes"] >= gc["rss_bytes"] > 0
    # vLLM freezes EngineCore's startup heap itself; the CPU worker and the offline front-end stay unfrozen.
    assert roles["engine_core"]["gc"]["freeze_count"] > 0
    assert roles["worker"]["gc"]["freeze_count"] == 0


def test_pauses_are_classified_and_slow_tokens_joined_with_them(reference: dict[str, Any]) -> None:
    for proc in reference["processes"]:
        gc = proc["gc"]
        classes = [gc["critical"]["collections"], gc["hidden"]["collections"]]
        assert [c + h for c, h in zip(*classes, strict=True)] == gc["collections"]
        assert gc["critical_max_pause_ms"] <= gc["max_pause_ms"] and "pauses" not in gc  # joined, not kept
    tail = reference["tail"]
    assert tail["samples"]["all"] == NUM_PROMPTS * (OUTPUT_LEN - 1)
    # At or above p99; the 12 requests' samples of one step can tie, so up to a step's worth beyond 1%.
    assert 0 < tail["samples"]["p99"] <= tail["samples"]["all"] // 100 + 2 * NUM_PROMPTS
    sources = {row["source"] for row in tail["rows"]}
    assert {"MainProcess", "EngineCore"} <= sources
    timeline = tail["timeline"]
    assert timeline["steps"] and timeline["tokens"] and timeline["span_s"] > 0.5  # the engine's steps were recorded


def test_gc_in_waits_moves_collections_off_the_critical_path(bench: Workbench) -> None:
    often = {"gc_threshold": {"base": 50, "gen0_per_seq": 0}}  # many collections, wherever they fall
    baseline = by_role(switched(bench, often)["processes"])
    moved = by_role(switched(bench, {"gc_in_waits": {"min_count": 50}})["processes"])
    for role in ("engine_core", "worker"):
        critical = [by["gc"]["critical"]["collections"][0] for by in (baseline[role], moved[role])]
        assert critical[0] >= 4 and critical[1] <= critical[0] // 2, (role, critical)
        # The worker's young objects mostly die before its next wait: it needs to collect there only now and then.
        assert sum(moved[role]["gc"]["hidden"]["collections"]) >= 1, role
        counters = moved[role]["counters"]["gc_in_waits"]
        assert counters["waits"] >= OUTPUT_LEN and counters["collected_gen0"] > 0, role


def switched(bench: Workbench, strategies: dict[str, dict[str, Any]]) -> dict[str, Any]:
    reports = bench.switch(strategies)
    assert not inactive_strategies(reports, strategies)
    return bench.repetition()


def assert_active_where_it_belongs(rep: dict[str, Any], name: str) -> None:
    roles = by_role(rep["processes"])
    for role in strategy_classes()[name].roles:
        assert name in roles[role.value]["active"], (name, role)


def test_strategy_keeps_greedy_tokens_identical(bench: Workbench, reference: dict[str, Any], applicable: str) -> None:
    """Each strategy that acts on this engine (``applicable``: one test per strategy, see tests/conftest.py)."""
    name = applicable
    cls = strategy_classes()[name]
    params = {p.name: (not p.default if p.kind == "bool" else p.default) for p in cls.params if p.default is not None}
    for variant in ({}, params):  # defaults, and every boolean flipped (e.g. the "off" side)
        rep = switched(bench, {name: variant})
        assert_active_where_it_belongs(rep, name)
        assert rep["token_ids"] == reference["token_ids"], (name, variant)


def test_gc_threshold_raises_gen0_and_collections_fall(bench: Workbench) -> None:
    low = switched(bench, {"gc_threshold": {"base": 50, "gen0_per_seq": 0}})
    high = switched(bench, {"gc_threshold": {"base": 50, "gen0_per_seq": 1000}})
    for role in ("frontend", "engine_core", "worker"):
        assert by_role(low["processes"])[role]["gc"]["threshold"][0] == 50
        assert by_role(high["processes"])[role]["gc"]["threshold"][0] == 50 + 1000 * TINY_ENGINE["max_num_seqs"]
    for role in ("frontend", "engine_core"):
        low_n = by_role(low["processes"])[role]["gc"]["collections"][0]
        high_n = by_role(high["processes"])[role]["gc"]["collections"][0]
        assert low_n >= 4 and high_n <= low_n // 4, (role, low_n, high_n)
    native = switched(bench, {})
    assert all(p["gc"]["threshold"][0] == 700 for p in native["processes"])  # reverted in place


def test_gc_freeze_on_everywhere_and_off_undoes_upstream(bench: Workbench) -> None:
    on = switched(bench, {"gc_freeze": {"enabled": True}})
    assert all(p["gc"]["freeze_count"] > 0 for p in on["processes"])
    off = switched(bench, {"gc_freeze": {"enabled": False}})
    assert all(p["gc"]["freeze_count"] == 0 for p in off["processes"])
    native = switched(bench, {})
    assert by_role(native["processes"])["engine_core"]["gc"]["freeze_count"] > 0  # upstream's freeze restored


def test_gc_refreeze_freezes_each_engine_process_again_after_n_steps(bench: Workbench) -> None:
    native = by_role(switched(bench, {})["processes"])
    refrozen = by_role(switched(bench, {"gc_refreeze": {"after_steps": 4}})["processes"])
    for role in ("engine_core", "worker"):
        counters = refrozen[role]["counters"]["gc_refreeze"]
        assert counters["steps_before_refreeze"] == 4 and counters["refreezes"] == 1, (role, counters)
        assert refrozen[role]["gc"]["freeze_count"] > native[role]["gc"]["freeze_count"], role
    reverted = by_role(switched(bench, {})["processes"])
    assert reverted["worker"]["gc"]["freeze_count"] == 0  # vLLM never freezes the CPU worker
    assert reverted["engine_core"]["gc"]["freeze_count"] > 0  # its start-up freeze, made again


def test_ndarray_outputs_flow_from_worker_to_scheduler(bench: Workbench) -> None:
    rep = switched(bench, {"ndarray_outputs": {"enabled": True}})
    roles = by_role(rep["processes"])
    assert roles["worker"]["counters"]["ndarray_outputs"]["ndarray_steps"] >= OUTPUT_LEN
    assert roles["engine_core"]["counters"]["ndarray_outputs"]["rows_to_lists"] >= OUTPUT_LEN


def test_shared_empty_kv_blocks_off_allocates_fresh_empty_blocks_where_vllm_shares(bench: Workbench) -> None:
    off = by_role(switched(bench, {"shared_empty_kv_blocks": {"enabled": False}})["processes"])
    off_counts = off["engine_core"]["counters"]["shared_empty_kv_blocks"]
    assert "shared_empty" not in off_counts
    on = by_role(switched(bench, {"shared_empty_kv_blocks": {"enabled": True}})["processes"])
    on_counts = on["engine_core"]["counters"]["shared_empty_kv_blocks"]
    # The same workload: every empty result vLLM shares is a fresh object with the strategy off.
    assert on_counts["shared_empty"] == off_counts["fresh_empty"] > 0


def test_sampler_copy_elision_is_refused_on_the_v1_runner() -> None:
    verdict = strategy_classes()["sampler_copy_elision"]().applicable()
    assert not verdict.ok and "V1 model runner" in verdict.reason


def test_third_party_strategy_is_listed_and_applied(bench: Workbench) -> None:
    assert "step_delay" in strategy_classes()
    rep = switched(bench, {"step_delay": {"delay_ms": 0.5}})
    engine_core = by_role(rep["processes"])["engine_core"]
    assert engine_core["active"]["step_delay"] == {"delay_ms": 0.5}
    assert engine_core["counters"]["step_delay"]["delayed_steps"] >= OUTPUT_LEN


def test_missing_strategy_fails_loudly(bench: Workbench) -> None:
    reports = bench.session.control({"op": "switch", "strategies": {}})
    with pytest.raises(StrategyNotActive, match="gc_threshold: not active in"):
        check_active(reports, {"gc_threshold": {}})
    assert Role.WORKER in strategy_classes()["gc_threshold"].roles
