"""Every failure loud, every signal honoured, the control endpoint closed to strangers (issue 12); the failures
that need a real engine are in ``tests/engine/test_failures_loud_engine.py``.

Each test reproduces one way the tool used to fail quietly: a quickstart that never wrote its report, a sweep that
measured nothing and exited 0, Ctrl-C lost in a start-up handshake or in a GC hook, a baseline that could not run
because the space fixes a strategy on, a control endpoint anyone on the host could drive, an A/A check that left out
the step-level method.
"""

from __future__ import annotations

import http.client
import json
import stat
import subprocess
import sys
import textwrap
import urllib.parse
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml
from typer.testing import CliRunner

from tests.support import REPO, SMALL_WORKLOAD, TINY_ENGINE
from tuner.cli.main import app
from tuner.config.search import Search
from tuner.engine.session import EngineError, EngineSession
from tuner.plugin.control_endpoint import MAX_BODY_BYTES, serve_control
from tuner.sweep.study import trial_config
from tuner.sweep.trial_attrs import TrialAttrs

# ----------------------------------------------------------------------------------------------- quickstart


def _fake_quickstart(tmp_path: Path, sweep_status: int, calibrate_status: int = 0) -> tuple[Path, Path]:
    """The real quickstart script beside a no-op setup and a fake `tuner` that logs its calls and prints a long
    help (the old guard piped it into `grep -q`, which closes the pipe early: tuner died of SIGPIPE)."""
    (tmp_path / "scripts").mkdir()
    script = tmp_path / "scripts" / "quickstart.sh"
    script.write_text((REPO / "scripts" / "quickstart.sh").read_text())
    (tmp_path / "scripts" / "setup.sh").write_text("exit 0\n")
    calls = tmp_path / "calls.txt"
    fake = tmp_path / ".venv" / "bin" / "tuner"
    fake.parent.mkdir(parents=True)
    fake.write_text(
        textwrap.dedent(f"""\
        #!/usr/bin/env bash
        echo "$*" >> {calls}
        if [ "$1" = "--help" ]; then for i in $(seq 20000); do echo " report  write a report $i"; done; fi
        if [ "$1" = "calibrate" ]; then exit {calibrate_status}; fi
        if [ "$1" = "sweep" ]; then exit {sweep_status}; fi
        exit 0
        """)
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    return script, calls


@pytest.mark.parametrize(("calibrate_status", "sweep_status", "expected"), [(0, 0, 0), (0, 5, 5), (4, 0, 4), (4, 5, 5)])
def test_quickstart_calibrates_sweeps_and_always_reports_keeping_the_worst_status(
    tmp_path: Path, calibrate_status: int, sweep_status: int, expected: int
) -> None:
    """A failed calibration is said and kept in the exit status, but the sweep still runs (at its default block
    length) and the report is always written; the sweep's failure wins."""
    script, calls = _fake_quickstart(tmp_path, sweep_status, calibrate_status)
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=60)
    assert done.returncode == expected, done.stderr
    logged = calls.read_text().splitlines()
    assert logged[0].startswith("calibrate experiments/quickstart.yaml")
    assert logged[1].startswith("sweep experiments/quickstart.yaml")
    assert "report results/quickstart" in logged
    assert ("the calibration failed" in done.stderr) is bool(calibrate_status)


# ------------------------------------------------------------------------------------- a sweep that failed


def _sweep_file(tmp_path: Path, space: dict[str, Any]) -> Path:
    path = tmp_path / "sweep.yaml"
    body = {
        "name": "loud",
        "engine": TINY_ENGINE,
        "workload": SMALL_WORKLOAD,
        "search": {"space": space, "pairs": {"min": 2, "max": 2}, "method": "runs"},
        "output_dir": str(tmp_path / "results"),
    }
    path.write_text(yaml.safe_dump(body))
    return path


def test_a_sweep_whose_engine_cannot_start_tries_once_and_exits_5(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    attempts: list[dict[str, Any]] = []

    def failing_start(engine_args: dict[str, Any], *args: Any, **kwargs: Any) -> EngineSession:
        attempts.append(engine_args)
        raise EngineError("the vLLM engine failed to start: ValueError: no room for the KV cache")

    monkeypatch.setattr("tuner.measure.workbench.open_session", failing_start)
    path = _sweep_file(tmp_path, {"gc_threshold": [False, True], "gc_freeze": [False, True]})
    result = CliRunner().invoke(app, ["sweep", str(path)])
    assert result.exit_code == 5, result.output
    assert len(attempts) == 1  # one engine config, one start: the other 3 trials fail without another try
    assert "the study is incomplete: the baseline trial did not complete" in result.stderr
    assert "Traceback" not in result.output
    summary = json.loads((tmp_path / "results" / "loud" / "sweep" / "summary.json").read_text())
    assert [t["state"] for t in summary["trials"]] == ["FAIL"] * 4
    assert all("failed to start" in t["failure"] for t in summary["trials"])
    assert summary["winner"]["trial"] is None
    assert summary["winner"]["reason"] == "no verdict: the baseline trial did not complete"


def test_the_baseline_runs_when_the_space_fixes_a_strategy_on() -> None:
    search = Search.model_validate({"space": {"gc_threshold": [True], "gc_threshold.gen0_per_seq": [64]}})
    study = optuna.create_study()
    study.enqueue_trial({"gc_threshold": False}, user_attrs=dict(TrialAttrs(baseline=True)))  # vLLM as installed
    baseline = study.ask()
    assert trial_config(baseline, search, aa=False).strategies == {}  # used to raise: False not in (True,)
    other = study.ask()
    assert trial_config(other, search, aa=False).strategies == {"gc_threshold": {"gen0_per_seq": 64}}


# ------------------------------------------------------------------------------------------------- signals


GC_HOOK_SCRIPT = """
import gc, os, signal, sys, time
if sys.argv[1] == "install":
    from tuner import interrupts
    interrupts.install()

sent = []

def slow_hook(phase, info):  # like a GC probe, slow; after 0.5 s the SIGINT arrives while it runs, once
    if not sent and time.monotonic() - start > 0.5:
        sent.append(os.kill(os.getpid(), signal.SIGINT))  # its handler runs at the next bytecode: in this hook
    end = time.perf_counter() + 0.005
    while time.perf_counter() < end:
        pass

start = time.monotonic()
gc.callbacks.append(slow_hook)
gc.set_threshold(10)
try:
    junk = []
    while time.monotonic() - start < 4:
        junk.append([[] for _ in range(20)])
        if len(junk) > 200:
            junk.clear()
    print("not interrupted")
except KeyboardInterrupt:
    print(f"interrupted after {time.monotonic() - start:.1f} s")
"""


def test_a_signal_inside_a_gc_hook_is_not_swallowed() -> None:
    def run(mode: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", GC_HOOK_SCRIPT, mode], cwd=REPO, capture_output=True, text=True, timeout=60
        )

    # The signal is sent from inside the hook, so it lands there on a loaded host too (a timer thread's signal
    # landed outside it once under two test workers, and Python's own handler then interrupted the loop).
    control = run("plain")  # Python's own handler: the KeyboardInterrupt is raised in the hook and dropped
    # (usually with an "Exception ignored" line on stderr; a fresh-clone run once dropped it without one)
    assert control.stdout.strip() == "not interrupted"
    handled = run("install")
    assert handled.stdout.startswith("interrupted after"), handled.stdout + handled.stderr
    assert float(handled.stdout.split()[2]) < 2.0
    assert "Exception ignored" not in handled.stderr


LATE_ABORT_SCRIPT = """
import os, signal, sys, threading, time
from tuner import interrupts

sent = []
watch = threading.Timer(0.2, lambda: sent.append(interrupts.interrupt_main(RuntimeError("engine died"))))
interrupts.install()
try:
    watch.start()
    if sys.argv[1] == "ctrl-c":
        os.kill(os.getpid(), signal.SIGINT)
    time.sleep(3)
    outcome = "nothing raised"
except KeyboardInterrupt:
    interrupts.acknowledge()
    time.sleep(1)  # the clean-up after Ctrl-C, while a watch reports the engine it killed
    outcome = "interrupted"
except RuntimeError as exc:
    outcome = f"aborted: {exc}"
watch.join()  # the watch's own line first, whichever thread finished first
print("sent", *sent)
print(outcome)
"""


def test_an_engine_abort_after_ctrl_c_does_not_replace_the_interrupt() -> None:
    """The start watch raises "engine died" in the main thread; after a Ctrl-C, whose clean-up kills the engine,
    it must not (a run interrupted at start-up once exited 4, not 130). Without Ctrl-C it still does."""

    def run(mode: str) -> list[str]:
        done = subprocess.run(
            [sys.executable, "-c", LATE_ABORT_SCRIPT, mode], cwd=REPO, capture_output=True, text=True, timeout=60
        )
        return done.stdout.split("\n")[:-1]

    assert run("plain") == ["sent True", "aborted: engine died"]
    assert run("ctrl-c") == ["sent False", "interrupted"]


# ------------------------------------------------------------------------------------------ control endpoint


def _post(url: str, body: bytes, token: str | None, length: int | None = None) -> tuple[int, Any]:
    """POST ``body``, announcing ``length`` bytes (a client may claim more than it sends: refused unread)."""
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        connection.putrequest("POST", parts.path)
        connection.putheader("Content-Length", str(len(body) if length is None else length))
        if token is not None:
            connection.putheader("Authorization", f"Bearer {token}")
        connection.endheaders(body)
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def test_the_control_endpoint_serves_only_the_tuner_that_holds_its_token(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []

    def answer(request: dict[str, Any]) -> list[dict[str, Any]]:
        seen.append(request)
        return [{"switched": request.get("strategies")}]

    port_file = tmp_path / "control-port"
    server = serve_control("s3cret", port_file, answer)
    try:
        url = f"http://127.0.0.1:{int(port_file.read_text())}/control"
        switch = json.dumps({"op": "switch", "strategies": {"gc_threshold": {}}}).encode()
        assert _post(url, switch, None)[0] == 401
        assert _post(url, switch, "guess")[0] == 401
        assert _post(url.replace("/control", "/other"), switch, "s3cret")[0] == 404
        assert seen == []  # nothing was changed by a caller without the token
        assert _post(url, b"{}", "s3cret", length=MAX_BODY_BYTES + 1)[0] == 413
        assert _post(url, b"[1, 2]", "s3cret")[0] == 500  # not a request object
        assert _post(url, switch, "s3cret") == (200, [{"switched": {"gc_threshold": {}}}])
        assert seen == [{"op": "switch", "strategies": {"gc_threshold": {}}}]
        with pytest.raises(FileExistsError):  # a second API-server process does not take over the endpoint
            serve_control("other", port_file, answer)
    finally:
        server.shutdown()
        server.server_close()


# ---------------------------------------------------------------------------------------------------- A/A
