"""vLLM's environment variables without an engine: values as the environment holds them, the overlay an engine
start sets and takes back, and the check that every engine process runs with them."""

from __future__ import annotations

import os
from typing import Any

import pytest

from tuner.errors import EnvNotInForce
from tuner.measure.workbench import check_env_in_force
from tuner.vllm.imports import env_overlay, env_problem, env_text


def test_switches_are_written_as_vllm_parses_them() -> None:
    assert [env_text(v) for v in (True, False, 3, 0.5, "auto")] == ["1", "0", "3", "0.5", "auto"]
    assert env_problem("VLLM_USE_V2_MODEL_RUNNER", True) is None  # "1": vLLM's int() reads it
    assert "did you mean VLLM_USE_FASTOKENS" in (env_problem("VLLM_USE_FASTOKEN", 1) or "")


def test_the_overlay_is_read_by_vllm_here_even_after_it_cached_its_variables_and_is_taken_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from vllm import envs

    monkeypatch.setenv("VLLM_LOG_STATS_INTERVAL", "7")
    envs.enable_envs_cache()  # as an engine start in this process does
    try:
        with env_overlay({"VLLM_LOG_STATS_INTERVAL": "3", "VLLM_USE_V2_MODEL_RUNNER": "1"}):
            assert envs.VLLM_LOG_STATS_INTERVAL == 3 and envs.VLLM_USE_V2_MODEL_RUNNER is True
        assert os.environ["VLLM_LOG_STATS_INTERVAL"] == "7" and "VLLM_USE_V2_MODEL_RUNNER" not in os.environ
        assert envs.VLLM_LOG_STATS_INTERVAL == 7
    finally:
        envs.disable_envs_cache()


def report(name: str, variables: dict[str, str]) -> Any:
    return {"pid": 1, "process_name": name, "vllm_env": variables}


def test_an_engine_process_without_the_variables_fails_the_start_naming_it() -> None:
    wanted = {"VLLM_X": "1"}
    check_env_in_force(
        [report("EngineCore", {"VLLM_X": "1"}), report("Worker", {"VLLM_X": "1", "VLLM_Y": "2"})], wanted
    )
    with pytest.raises(EnvNotInForce, match=r"VLLM_X=1 is unset in Worker \(pid 1\)"):
        check_env_in_force([report("EngineCore", {"VLLM_X": "1"}), report("Worker", {})], wanted)
    with pytest.raises(EnvNotInForce, match="VLLM_X=1 is 0 in EngineCore"):
        check_env_in_force([report("EngineCore", {"VLLM_X": "0"})], wanted)
