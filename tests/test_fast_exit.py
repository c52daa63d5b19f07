"""The test suite's fast exit for spawned engine processes (``tests/plumbing/suite_plumbing/fast_exit.py``):
the process ends with its own status after its ``atexit`` handlers, and only the interpreter's teardown is left out."""

from __future__ import annotations

import multiprocessing
import os
import sys
import types
from pathlib import Path
from typing import Any

import pytest

PLUMBING = Path(__file__).parent / "plumbing"  # not from conftest: importing it sets the variable under test


class _Marker:
    """Writes ``path`` when collected: it outlives the process's code only in the interpreter's teardown."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __del__(self, _os: Any = os) -> None:  # module globals may be gone by then: os is bound here
        _os.close(_os.open(self.path, _os.O_WRONLY | _os.O_CREAT, 0o644))


def _child(out: str, status: int) -> None:
    import atexit

    sys.path.insert(0, str(PLUMBING))
    from suite_plumbing.fast_exit import register

    register()
    atexit.register(lambda: (Path(out) / "atexit").write_text("ran"))
    held = types.ModuleType("fast_exit_marker")  # torn down with the other modules at the interpreter's exit
    held.marker = _Marker(Path(out) / "teardown")  # type: ignore[attr-defined]
    sys.modules[held.__name__] = held
    sys.exit(status)  # not spawn_main's exit: raises as always, and the process ends with this status


@pytest.mark.parametrize("fast", [True, False])
def test_a_spawned_process_ends_with_its_status_after_atexit_and_skips_only_the_teardown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fast: bool
) -> None:
    if fast:
        monkeypatch.setenv("TUNER_TEST_FAST_EXIT", "1")
    else:
        monkeypatch.delenv("TUNER_TEST_FAST_EXIT", raising=False)
    child = multiprocessing.get_context("spawn").Process(target=_child, args=(str(tmp_path), 3))
    child.start()
    child.join(60)
    assert child.exitcode == 3
    assert (tmp_path / "atexit").read_text() == "ran"
    assert (tmp_path / "teardown").exists() is not fast
