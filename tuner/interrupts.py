"""Ctrl-C and SIGTERM end a command within seconds, whatever the main thread is doing.

Python runs signal handlers in the main thread, between bytecodes. Two things defeat that, and both happened:

- the signal is delivered to another thread while the main thread waits in C (vLLM's start-up handshake is one
  600 s ``zmq`` poll): nothing wakes the main thread, so the handler runs only when the poll times out;
- the handler runs inside a ``gc.callbacks`` hook (our GC probe) or a ``__del__``: an exception raised there is
  printed as "Exception ignored" and dropped.

:func:`install` handles both: a watcher thread, woken through :func:`signal.set_wakeup_fd`, re-delivers a signal to
the main thread (``pthread_kill``, which interrupts a blocking call) until the handler has run; and the handler,
when it finds itself inside such a hook, returns and has the signal re-delivered a moment later instead of
raising into the void. :func:`interrupt_main` raises an exception of the caller's choice in the main thread the
same way (the engine watch uses it to abort a start whose processes died).
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import socket
import sys
import threading
from types import CodeType, FrameType
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)
ABORT_SIGNAL = signal.SIGUSR1  # carries interrupt_main's exception to the main thread
REDELIVER_S = 0.05  # retry delay while the main thread is inside a hook or blocked in C
WAKE_CHECK_S = 0.2  # how long the main thread may take to run a handler before the signal is re-sent
STUCK_S = 1.0  # after the handler ran, this long on one instruction means the exception was lost in C
NUDGE_FOR_S = 30.0  # give up re-sending after this long


class _State:
    handled = 0  # handler invocations in the main thread
    pending: BaseException | None = None  # interrupt_main's exception, raised by the ABORT_SIGNAL handler
    sockets: tuple[socket.socket, socket.socket] | None = None  # the wake-up pair, while installed
    deferred: tuple[FrameType, Any] | None = None  # the frame set to raise on its next line, and the prior tracer
    acknowledged = False  # the command is ending because of the interrupt: no more re-sending
    interrupted = False  # a SIGINT or SIGTERM was raised in the main thread: the command is ending because of it


def _hook_codes() -> set[CodeType]:
    codes = set()
    for callback in gc.callbacks:
        function = getattr(callback, "__func__", callback)
        code = getattr(function, "__code__", None)
        if code is not None:
            codes.add(code)
    return codes


def hook_position(frame: FrameType | None) -> tuple[bool, FrameType | None]:
    """Whether ``frame`` runs inside a ``gc.callbacks`` hook or a ``__del__`` (where an exception is printed and
    ignored), and the first Python frame outside it, the code that triggered the hook (None if there is none)."""
    hooks = _hook_codes()
    inside, caller = False, None
    while frame is not None:
        if frame.f_code in hooks or frame.f_code.co_name == "__del__":
            inside, caller = True, frame.f_back
        frame = frame.f_back
    return inside, caller


def _raise_when_back_in(frame: FrameType, exc: BaseException) -> None:
    """Raise ``exc`` in ``frame`` at its next line, once the hook it called has returned.

    A frame's trace function runs only while tracing is on, so a no-op global tracer is set until then; any tracer
    already installed (a debugger, coverage) is put back afterwards.
    """
    _cancel_deferred()
    previous = sys.gettrace()

    def on_event(traced: FrameType, event: str, arg: object) -> Any:
        if traced is frame and event in ("line", "return", "exception"):
            _cancel_deferred()
            raise exc
        return on_event

    frame.f_trace = on_event
    sys.settrace(previous or (lambda *args: None))
    _State.deferred = (frame, previous)


def _cancel_deferred() -> None:
    if _State.deferred is not None:
        frame, previous = _State.deferred
        frame.f_trace = None
        sys.settrace(previous)
        _State.deferred = None


def _send_to_main(signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, OSError):
        ident = threading.main_thread().ident
        if ident is not None:
            signal.pthread_kill(ident, signum)


def _later(signum: int) -> None:
    timer = threading.Timer(REDELIVER_S, _send_to_main, (signum,))
    timer.daemon = True
    timer.start()


def _on_signal(signum: int, frame: FrameType | None) -> None:
    _State.handled += 1
    if signum == ABORT_SIGNAL:
        exc, _State.pending = _State.pending, None
        if exc is None:
            return
    else:
        exc = KeyboardInterrupt(f"signal {signal.Signals(signum).name}")
        _State.interrupted = True
    inside, caller = hook_position(frame)
    if not inside:
        _cancel_deferred()
        raise exc
    if caller is not None:  # raising here would be printed and ignored: raise where the hook returns to
        _raise_when_back_in(caller, exc)
    # ... and in case that frame's next line is a long blocking call, deliver again shortly (then, outside the
    # hook, the handler raises at once)
    if signum == ABORT_SIGNAL:
        _State.pending = exc
    _later(signum)


def _main_position() -> tuple[int, int] | None:
    """Where the main thread is: its innermost frame's code and instruction (constant while it waits in C)."""
    ident = threading.main_thread().ident
    frame = sys._current_frames().get(ident) if ident is not None else None
    return (id(frame.f_code), frame.f_lasti) if frame is not None else None


def _nudge(signum: int) -> None:
    """Re-send ``signum`` to the main thread until the interrupt is acknowledged: while the handler has not run
    (the main thread waits in C), and while, after it ran, the main thread stays on one instruction (a C call that
    dropped the exception: pyzmq's poll replaces it with ``InterruptedSystemCall`` and polls on)."""
    handled, last, still = _State.handled, _main_position(), 0
    for _ in range(int(NUDGE_FOR_S / WAKE_CHECK_S)):
        threading.Event().wait(WAKE_CHECK_S)
        if _State.acknowledged:
            return
        if _State.handled == handled:
            _send_to_main(signum)
            continue
        position = _main_position()
        still = still + 1 if position == last else 0
        last = position
        if still * WAKE_CHECK_S >= STUCK_S:
            _send_to_main(signum)
            still = 0


def _watch(wakeup: socket.socket) -> None:
    while True:
        try:
            data = wakeup.recv(64)
        except OSError:
            return
        if not data:
            return
        if data[-1] in {int(s) for s in SIGNALS}:
            _nudge(data[-1])


def acknowledge() -> None:
    """The interrupt reached the code that ends the command: stop re-sending it (clean-up runs undisturbed)."""
    _State.acknowledged = True


def install() -> None:
    """Route SIGINT, SIGTERM and :data:`ABORT_SIGNAL` through this module (main thread only; idempotent)."""
    if _State.sockets is not None:
        return
    for signum in (*SIGNALS, ABORT_SIGNAL):
        signal.signal(signum, _on_signal)
    reader, writer = socket.socketpair()
    writer.setblocking(False)
    signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    threading.Thread(target=_watch, args=(reader,), name="tuner-signals", daemon=True).start()
    _State.sockets = (reader, writer)


def _detach_in_child() -> None:
    """A forked child (vLLM forks EngineCore on a GPU host) must not write its own signals into the parent's
    wake-up socket, which the parent's watcher would re-deliver to the parent: back to Python's defaults."""
    if _State.sockets is None:
        return
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for signum in (signal.SIGTERM, ABORT_SIGNAL):
        signal.signal(signum, signal.SIG_DFL)
    _State.sockets = None
    _State.pending = None
    _State.interrupted = False


os.register_at_fork(after_in_child=_detach_in_child)


def interrupt_main(exc: BaseException) -> bool:
    """Raise ``exc`` in the main thread soon (from any thread), even if it is blocked in a C call.

    Only after :func:`install` (the CLI does it), and not once a SIGINT or SIGTERM was raised: the user's interrupt
    stays the reason the command ends (its clean-up kills the engine, which the start watch would otherwise report
    as an engine that died). Returns whether the exception was sent.
    """
    if _State.sockets is None or _State.interrupted:
        return False
    _State.pending = exc
    _send_to_main(ABORT_SIGNAL)
    return True
