"""A server the tuner starts runs below the tuner on the CPU (:func:`tuner.engine.server.lower_priority`), so that
the client's clock does not wait behind it; what the server starts later inherits that."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tuner.engine.server import autogroup_nice, lower_priority

AUTOGROUPS = autogroup_nice("self") is not None


def _ours() -> int:
    return os.getpriority(os.PRIO_PROCESS, 0)


@pytest.fixture
def leader() -> Iterator[subprocess.Popen[str]]:
    """A session leader (as the server is) that reports, after a moment, the nice of a process it then starts."""
    later = "import os, subprocess, sys, time; time.sleep(0.5); " + (
        "print(subprocess.run([sys.executable, '-c', 'import os; print(os.getpriority(os.PRIO_PROCESS, 0))'], "
        "capture_output=True, text=True).stdout.strip(), flush=True); time.sleep(30)"
    )
    child = subprocess.Popen([sys.executable, "-c", later], start_new_session=True, stdout=subprocess.PIPE, text=True)
    yield child
    child.kill()
    child.wait()


def test_the_server_runs_ten_steps_below_the_tuner_and_what_it_starts_later_too(
    leader: subprocess.Popen[str],
) -> None:
    lower_priority(leader.pid, 10)
    expected = min(19, _ours() + 10)
    assert os.getpriority(os.PRIO_PROCESS, leader.pid) == expected
    assert leader.stdout is not None
    assert int(leader.stdout.readline()) == expected  # a process the server starts after the change
    if AUTOGROUPS:
        assert autogroup_nice(leader.pid) == min(19, autogroup_nice(os.getpid()) + 10)


def test_nice_0_leaves_the_server_as_the_host_schedules_it(leader: subprocess.Popen[str]) -> None:
    before = os.getpriority(os.PRIO_PROCESS, leader.pid), autogroup_nice(leader.pid) if AUTOGROUPS else None
    lower_priority(leader.pid, 0)
    assert (os.getpriority(os.PRIO_PROCESS, leader.pid), autogroup_nice(leader.pid) if AUTOGROUPS else None) == before


def test_a_process_gone_already_is_no_error() -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    gone.wait()
    lower_priority(gone.pid, 10)  # best effort: nothing to lower, nothing raised


def test_an_empty_autogroup_file_as_sandboxed_kernels_give_is_read_as_none_and_the_nice_still_lowered(
    leader: subprocess.Popen[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tuner.engine.server.Path.read_text", lambda self, *a, **k: "")
    assert autogroup_nice("self") is None
    lower_priority(leader.pid, 10)
    assert os.getpriority(os.PRIO_PROCESS, leader.pid) == min(19, _ours() + 10)


def test_a_process_gone_has_no_autogroup_to_read() -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    gone.wait()
    assert autogroup_nice(gone.pid) is None
