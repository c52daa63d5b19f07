"""``shm_spin_window`` on vLLM's own ``SpinCondition`` (the installed release's class, no engine): the window it
sets is the one vLLM's wait reads, each wait is counted as spinning or sleeping, and revert gives every reader its
own window back. On the engine, ``tests/engine/test_engine.py`` proves it active in EngineCore and the worker."""

from __future__ import annotations

import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from strategies.framework.base import ProcessContext, Role
from strategies.shm_spin_window import ShmSpinWindow


@pytest.fixture
def reader() -> Iterator[Any]:
    zmq = pytest.importorskip("zmq")
    from vllm.distributed.device_communicators import shm_broadcast
    from vllm.utils.network_utils import get_open_zmq_ipc_path

    context = zmq.Context()
    address = get_open_zmq_ipc_path()
    writer = shm_broadcast.SpinCondition(is_reader=False, context=context, notify_address=address)
    condition = shm_broadcast.SpinCondition(is_reader=True, context=context, notify_address=address)
    yield condition
    writer.local_notify_socket.close(linger=0)
    for socket in (condition.local_notify_socket, condition.read_cancel_socket, condition.write_cancel_socket):
        socket.close(linger=0)
    context.term()


def test_the_window_is_the_one_vllms_wait_reads_and_revert_restores_it(reader: Any) -> None:
    strategy = ShmSpinWindow()
    strategy.install()
    strategy.install()  # idempotent: one wrapper, not two
    ctx = ProcessContext(Role.WORKER)
    assert reader.busy_loop_s == 1  # vLLM's own window

    strategy.apply(ctx, ShmSpinWindow.resolve_params({"window_s": 0.05}))
    reader.record_read()
    reader.wait(timeout_ms=0)  # within 50 ms of the last read: vLLM spins (yields and returns)
    assert reader.busy_loop_s == 0.05 and strategy.counters == {"spin_waits": 1}
    time.sleep(0.08)
    started = time.monotonic()
    reader.wait(timeout_ms=30)  # past the window: vLLM polls for a notification, which never comes
    assert time.monotonic() - started >= 0.025  # it slept on the socket, as vLLM does after its window
    assert strategy.counters == {"spin_waits": 1, "sleeping_waits": 1}

    strategy.revert(ctx)
    reader.wait(timeout_ms=0)
    assert reader.busy_loop_s == 1 and sum(strategy.counters.values()) == 2  # native again, and not counted


def test_a_window_outside_zero_to_one_second_is_refused() -> None:
    for bad in (-0.001, 1.5):
        with pytest.raises(ValueError, match="window_s must be"):
            ShmSpinWindow.resolve_params({"window_s": bad})
    assert ShmSpinWindow.resolve_params({}) == {"window_s": 1.0}


def test_refused_where_there_is_no_shared_memory_queue() -> None:
    def config(backend: str) -> Any:
        return SimpleNamespace(parallel_config=SimpleNamespace(distributed_executor_backend=backend))

    assert ShmSpinWindow().refuses(config("mp")) is None
    assert ShmSpinWindow().refuses(config("uni")) == (
        "the 'uni' executor has no shared-memory queue between EngineCore and its workers"
    )
