"""``mode: serve`` on the real CPU build: vLLM's OpenAI server started, streamed, switched, stopped.

Also an endpoint the tuner did not start (measured from outside), and SIGTERM while the server starts.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
import yaml

from tests.support import TINY_ENGINE, decode_step_s, is_engine_core
from tuner.capacity import capacity_on, configuration_from
from tuner.config import Experiment, Sampling, Slo
from tuner.engine.server import ServerSession, record_chunk, server_command, sse_data
from tuner.measure.workbench import Workbench, open_session
from tuner.metrics.timings import RequestTiming, summarize
from tuner.plugin.protocol import encode_spec
from tuner.records.capacity import ARMS, load_capacity
from tuner.traffic.requests import RequestSpec
from tuner.vllm.arguments import cli_flags

pytestmark = pytest.mark.engine

NUM_PROMPTS = 8
OUTPUT_LEN = 16
WORKLOAD = {
    "num_prompts": NUM_PROMPTS,
    "input_len": {"dist": "fixed", "value": 8},
    "output_len": {"dist": "fixed", "value": OUTPUT_LEN},
    "rate": 40,
}


def vllm_server_processes() -> set[int]:
    """Every API server, EngineCore or vLLM worker process on the machine (ours or orphaned)."""
    found = set()
    for proc in psutil.process_iter(["name", "cmdline"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if "tuner.engine.serve_entry" in cmdline or (proc.info["name"] or "").startswith("VLLM::"):
            found.add(proc.pid)
    return found


def new_strays(before: set[int]) -> set[int]:
    deadline = time.monotonic() + 10
    while (strays := vllm_server_processes() - before) and time.monotonic() < deadline:
        time.sleep(0.5)
    return strays


def wait_for_engine_core(before: set[int], timeout_s: float) -> None:
    """Wait until a server started after ``before`` has spawned its EngineCore."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for pid in vllm_server_processes() - before:
            with contextlib.suppress(psutil.Error):
                if is_engine_core(psutil.Process(pid)):
                    return
        time.sleep(0.2)
    raise AssertionError("no server spawned an EngineCore")


def serve_experiment(tmp_path: Path, **extra: Any) -> Path:
    path = tmp_path / "serve.yaml"
    data = {
        "name": "serve-test",
        "mode": "serve",
        "engine": TINY_ENGINE,
        "workload": WORKLOAD,
        "measure": {"repetitions": 2, "warmup_prompts": 2, "slo": {"ttft_ms": 60_000}},
        "output_dir": str(tmp_path),
        **extra,
    }
    path.write_text(yaml.safe_dump(data))
    return path


def test_engine_args_become_server_flags() -> None:
    command = server_command(
        {"model": "/m", "enforce_eager": True, "enable_prefix_caching": False, "hf_overrides": {"a": 1}}, 8000, []
    )
    flags = command[command.index("--port") + 2 :]
    assert flags[0] == "--served-model-name=tuner-model"
    assert "--enforce-eager" in flags and "--no-enable-prefix-caching" in flags
    assert '--hf-overrides={"a": 1}' in flags


def test_streamed_chunks_become_token_timings() -> None:
    one = RequestTiming(prompt_tokens=3, sent=0.0)
    lines = [
        'data: {"choices": [{"text": "", "token_ids": [5], "finish_reason": null}]}',
        "",
        'data: {"choices": [{"text": "", "token_ids": [6, 7], "finish_reason": "length"}]}',
        "data: [DONE]",
    ]
    for now, line in enumerate(lines, start=1):
        chunk = sse_data(line)
        if chunk is not None:
            record_chunk(one, chunk, float(now))
    assert one.token_ids == [5, 6, 7] and one.chunk_tokens == [1, 2]
    assert one.chunk_times == [1.0, 3.0] and one.finished == 3.0
    metrics = summarize([one], 4.0, Slo(ttft_ms=500))
    assert metrics["ttft_ms"]["p50"] == 1000 and metrics["goodput_requests_per_s"] == 0  # the SLO was missed
    assert summarize([one], 4.0, Slo(ttft_ms=1500))["goodput_requests_per_s"] == 0.25


def test_serve_run_end_to_end(tmp_path: Path) -> None:
    """`tuner run` starts the server with a strategy, streams, records every process, and stops it all."""
    before = vllm_server_processes()
    path = serve_experiment(tmp_path, strategies={"gc_threshold": {"gen0_per_seq": 8}})
    proc = subprocess.run(
        [sys.executable, "-m", "tuner", "run", str(path)], capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert new_strays(before) == set(), "server processes left behind"
    run = json.loads(next((tmp_path / "serve-test").glob("*/run.json")).read_text())
    assert run["engine"]["mode"] == "serve"
    for rep in run["repetitions"]:
        metrics = rep["metrics"]
        assert metrics["completed"] == NUM_PROMPTS and metrics["output_tokens"] == NUM_PROMPTS * OUTPUT_LEN
        assert 0 < metrics["ttft_ms"]["p50"] <= metrics["ttft_ms"]["p99"] <= metrics["e2e_ms"]["p99"]
        assert 0 < metrics["itl_ms"]["p50"] <= metrics["itl_ms"]["p99"]
        assert metrics["goodput_requests_per_s"] == pytest.approx(metrics["requests_per_s"])
        processes = {role: p for p in rep["processes"] for role in p["roles"]}
        assert set(processes) == {"frontend", "engine_core", "worker"}
        api_server = processes["frontend"]
        assert api_server["process_name"] == "MainProcess"  # the API server's own process, not the tuner's
        assert api_server["gc"]["window_s"] > 0 and len(api_server["gc"]["collections"]) == 3
        assert api_server["gc"]["peak_rss_bytes"] > 0
        threshold = 700 + 8 * TINY_ENGINE["max_num_seqs"]
        assert all(p["gc"]["threshold"][0] == threshold for p in processes.values())
        assert all("gc_threshold" in p["active"] for p in processes.values())


@pytest.fixture(scope="module")
def server() -> Iterator[ServerSession]:
    experiment = Experiment.model_validate({"name": "s", "engine": TINY_ENGINE, "mode": "serve"})
    install = ["gc_freeze", "known_delay"]
    session = open_session(experiment.engine, encode_spec({}, install), streaming=True, serve=experiment.serving)
    assert isinstance(session, ServerSession)
    try:
        yield session
    finally:
        session.close()


def test_strategies_switch_in_place_in_every_server_process(server: ServerSession) -> None:
    on = server.control({"op": "switch", "strategies": {"gc_freeze": {"enabled": True}}})
    assert len(on) == 3 and all(p["gc"]["freeze_count"] > 0 for p in on)
    off = server.control({"op": "switch", "strategies": {}})
    assert all("gc_freeze" not in p["active"] for p in off)


def test_a_started_server_empties_its_prefix_cache_before_each_replay(server: ServerSession) -> None:
    assert server.reset_prefix_cache()  # vLLM's development endpoint, which the tuner's servers expose


def test_an_endpoint_is_measured_from_outside(server: ServerSession) -> None:
    experiment = Experiment.model_validate(
        {
            "name": "endpoint",
            "engine": TINY_ENGINE,
            "mode": "serve",
            "serve": {"endpoint": server.url},
            "workload": WORKLOAD,
            "measure": {"warmup_prompts": 0, "slo": {"ttft_ms": 1e-3}},  # no request can meet it
        }
    )
    endpoint = open_session(experiment.engine, encode_spec({}), streaming=True, serve=experiment.serving)
    assert endpoint.mode == "endpoint" and endpoint.processes == []
    rep = Workbench(endpoint, experiment).repetition()
    endpoint.close()
    assert rep["processes"] == []  # nothing of ours runs there: no per-process telemetry
    assert rep["metrics"]["completed"] == NUM_PROMPTS and rep["metrics"]["goodput_requests_per_s"] == 0
    assert httpx.get(f"{server.url}/health").status_code == 200  # closing the endpoint left it running


def test_greedy_tokens_survive_a_strategy_switch_in_the_server(server: ServerSession) -> None:
    requests = [RequestSpec([11, 12, 13, 14], 6), RequestSpec([20, 21], 6)]
    server.control({"op": "switch", "strategies": {}})
    native, _ = server.run(requests, [0.0, 0.0], Sampling())
    assert all(len(t.token_ids) == 6 for t in native)
    server.control({"op": "switch", "strategies": {"gc_freeze": {"enabled": False}}})
    switched, _ = server.run(requests, [0.0, 0.0], Sampling(), concurrency=1)
    assert [t.token_ids for t in switched] == [t.token_ids for t in native]


def test_capacity_is_searched_through_the_server(server: ServerSession, tmp_path: Path) -> None:
    """``tuner capacity`` in ``mode: serve``: both arms switched in place in every server process, each level's
    requests met or missed as seen from outside the API server, the record written with its levels and sentence.
    Whether the worker wait moves the knee is the in-process test's (tests/test_capacity.py); here a short budget
    only has to measure both arms at several loads. Its figures are in this engine's decode steps (as there): a
    TTFT target of 21, a wait of 0.55, a start at 0.4 requests per step and 4,200 steps of budget (200 ms, 5 ms,
    42 requests/s and 40 s at a 9.5 ms step). It must afford a step down as well as up: a served run here sometimes
    stalls ~1.5 s (15 of 16 requests then miss), and a stall in the first level sends the search down to half the
    rate, whose runs are forecast from the stalled one (~15 s); with 20 s that step did not fit."""
    workload = {**WORKLOAD, "num_prompts": 16}
    burst = {**WORKLOAD, "num_prompts": 64, "output_len": {"dist": "fixed", "value": 32}}  # queued: full batches
    probe = Experiment.model_validate({"name": "step", "engine": TINY_ENGINE, "mode": "serve", "workload": burst})
    step_s = decode_step_s(Workbench(server, probe), TINY_ENGINE)
    experiment = Experiment.model_validate(
        {
            "name": "served",
            "engine": TINY_ENGINE,
            "mode": "serve",
            "workload": {**workload, "rate": 0.4 / step_s},
            "measure": {"warmup_prompts": 0, "slo": {"ttft_ms": 21 * step_s * 1e3}},
            "capacity": {
                "attainment": 0.9,
                "growth": 2.0,
                "rounds": 2,
                "budget_s": 4_200 * step_s,
                "max_load": 10 / step_s,
            },
            "strategies": {"known_delay": {"worker_ms": 0.55 * step_s * 1e3}},
            "output_dir": str(tmp_path),
        }
    )
    path, record = capacity_on(Workbench(server, experiment), experiment, configuration_from(experiment, None))
    assert record["mode"] == "serve" and len(record["levels"]) >= 2, record["search"]
    for level in record["levels"]:
        runs = level["runs"]
        assert len(runs["reference"]) == len(runs["configuration"]) == level["rounds"] >= 1
        assert level["requests"] == 16 and all(0 <= r["attainment"] <= 1 for r in runs["reference"])
    assert record["summary"] and load_capacity(path)["levels"] == record["levels"]
    assert (path.parent / "report.md").is_file()
    # the host's load around every run: the client, API server and engine all busy while a run measures
    host = record["host"]
    assert host is not None and host["runs"] == {arm: sum(lv["rounds"] for lv in record["levels"]) for arm in ARMS}
    every = [r for lv in record["levels"] for arm in ARMS for r in lv["runs"][arm]]
    assert all(0 <= r["host_busy"] <= 1 and r["tree_cpus"] > 0 for r in every), every
    print(f"host: {host['saturated']} of {host['runs']} runs saturated, busy {host['busy_median']:.2f}: {host['note']}")


def test_sigterm_while_the_server_starts_stops_all_of_it(tmp_path: Path) -> None:
    """SIGTERM once the server has spawned its EngineCore, before it is healthy: the hardest moment to clean up.

    (A finished run's graceful stop is covered by the end-to-end test.)
    """
    before = vllm_server_processes()
    path = serve_experiment(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tuner", "run", str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        wait_for_engine_core(before, timeout_s=300)
        os.kill(proc.pid, signal.SIGTERM)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr[-3000:]
    assert "interrupted" in stderr and "Traceback" not in stderr.split("error:")[-1]
    assert new_strays(before) == set()


def test_any_yaml_mapping_becomes_a_json_flag() -> None:
    """Found by the loader fuzzer: mixed key types and dates used to raise inside json.dumps (a traceback)."""
    flags = cli_flags({"hf_overrides": {"": None, 0: dt.date(2001, 1, 1)}})
    assert flags == ['--hf-overrides={"": null, "0": "2001-01-01"}']


def test_a_value_that_begins_with_a_minus_stays_a_value() -> None:
    """Found by the loader fuzzer: ``max_num_seqs: -0.0`` as two arguments made vLLM's parser take ``-0.0`` for a
    dotted option and fail with an IndexError (a traceback); attached to its flag it is refused as a value."""
    from tuner.vllm.arguments import value_problem

    assert cli_flags({"max_num_seqs": -1}) == ["--max-num-seqs=-1"]
    assert value_problem("max_num_seqs", -0.0) == "invalid int value: '-0.0'"
