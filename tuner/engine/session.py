"""One live vLLM engine: start it with the plugin enabled, drive workloads, talk to its processes, stop it.

Two implementations of one small interface:

- :class:`OfflineSession` (``rate: inf``): an ``LLMEngine`` step loop with all requests queued at once, like
  ``vllm bench throughput``, but with delta outputs so every token gets a front-end timestamp;
- :class:`StreamingSession` (a rate or a concurrency): ``AsyncLLM`` streams, like ``vllm bench serve``
  without HTTP.

Both are reused across repetitions and trials; :meth:`EngineSession.control` switches strategies in place.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import threading
import time
from abc import ABC, abstractmethod
from typing import Any

import psutil

from tuner import interrupts
from tuner.config import Sampling
from tuner.engine.processes import StartWatch, alive, children_since, fail_utility_calls
from tuner.engine.requests import Progress, drive_requests, engine_input, record_output, sampling_params
from tuner.errors import EngineError
from tuner.metrics import RequestTiming
from tuner.plugin.protocol import (
    CONTROL_METHOD,
    ENV_VAR,
    ControlRequest,
    ProcessReport,
    control_every_engine,
    load_plugin_here,
    local_control,
)
from tuner.traffic import RequestSpec
from tuner.vllm import condense, env_overlay, import_vllm, set_quiet_env


class EngineSession(ABC):
    """A started engine; ``start_s`` is how long it took to come up, ``stop_s`` (once closed) how long it took to
    go, until none of its processes was left."""

    mode: str
    """How requests reach vLLM: offline, streaming, serve or endpoint (recorded in run.json)."""
    local_frontend = True
    """Whether vLLM's front-end runs in this process (then the plugin reports from here too)."""

    def __init__(self, engine_args: dict[str, Any], plugin_spec: str, env: dict[str, str] | None = None) -> None:
        import_vllm()
        set_quiet_env()
        os.environ[ENV_VAR] = plugin_spec  # read by the plugin in this process and every child
        self._env = contextlib.ExitStack()  # vLLM's variables of this engine, in force until it closes
        self._env.enter_context(env_overlay(env or {}))
        self.env = dict(env or {})
        if self.local_frontend:
            load_plugin_here()  # vLLM loads plugins once per process: a second engine here brings its own spec
        self.engine_args = engine_args
        self.plugin_spec = plugin_spec
        started, wall = time.perf_counter(), time.time()
        self._run_id = 0
        try:
            self._start_watched(wall)
        except BaseException:
            self._env.close()
            raise
        self.processes = children_since(wall)
        self.start_s = time.perf_counter() - started
        self.stop_s: float | None = None
        self.died = threading.Event()
        self._closing = threading.Event()
        threading.Thread(target=self._watch, daemon=True, name="tuner-engine-watch").start()

    def _start_watched(self, wall: float) -> None:
        """Start the engine under the start watch; on any failure, kill what it spawned (since ``wall``)."""
        try:
            with StartWatch(wall):
                self._start()
        except EngineError:
            self.processes = children_since(wall)
            self.kill()
            raise
        except Exception as exc:  # what was spawned must not outlive a failed start
            self.processes = children_since(wall)
            self.kill()
            raise EngineError(f"the vLLM engine failed to start: {condense(exc)}") from exc
        except BaseException:  # Ctrl-C, SIGTERM
            interrupts.acknowledge()  # the start is being abandoned: let the clean-up run
            self.processes = children_since(wall)
            self.kill()
            raise

    def _watch(self, poll_s: float = 0.5) -> None:
        """If an engine process dies, fail whatever waits on it (vLLM's client would wait forever)."""
        while not self._closing.wait(poll_s):
            if any(not alive(p) for p in self.processes):
                self.died.set()
                self._wake_waiters(EngineError("an engine process died (killed, or crashed: see vLLM's log above)"))
                return

    def _wake_waiters(self, error: EngineError) -> None:  # noqa: B027 - sessions with blocking waits override it
        """Raise ``error`` in every call blocked on the dead engine."""

    def check_alive(self) -> None:
        """Raise :class:`EngineError` if an engine process has died."""
        if self.died.is_set():
            raise EngineError("an engine process died (killed, or crashed: see vLLM's log above)")

    @abstractmethod
    def _start(self) -> None: ...

    @abstractmethod
    def vocab_size(self) -> int: ...

    @abstractmethod
    def _engine_control(self, request: ControlRequest) -> list[ProcessReport]: ...

    @abstractmethod
    def run(
        self,
        requests: list[RequestSpec],
        offsets: list[float],
        sampling: Sampling,
        concurrency: int | None = None,
        progress: Progress | None = None,
    ) -> tuple[list[RequestTiming], float]:
        """Send ``requests`` at ``offsets`` (seconds); return their timings and the wall time."""

    @abstractmethod
    def _stop(self) -> None:
        """Shut the engine down the polite way."""

    @abstractmethod
    def reset_prefix_cache(self) -> bool:
        """Empty vLLM's prefix cache (between replays, so that each sees only its own shared prefixes); False where
        the engine does not allow it."""

    def close(self) -> None:
        """Stop the engine, then make sure none of its processes is left (also after a crash); once closed, again
        does nothing (a capacity search by restart pairs closes the engine it was given before its caller does)."""
        if self.stop_s is not None:
            return
        self._closing.set()
        started = time.perf_counter()
        try:
            self._stop()
        finally:
            self.kill()
            self._env.close()
            self.stop_s = time.perf_counter() - started

    def kill(self) -> None:
        """SIGKILL every process the engine started (a watchdog's last resort; idempotent)."""
        for proc in getattr(self, "processes", []):
            with contextlib.suppress(psutil.Error):
                proc.kill()
        psutil.wait_procs(getattr(self, "processes", []), timeout=10)

    def control(self, request: ControlRequest) -> list[ProcessReport]:
        """Send a plugin control request to every process; one report per process (front-end first)."""
        self.check_alive()
        local = local_control(request) if self.local_frontend else None
        reports = [local] if local is not None else []
        return reports + self._engine_control(request)

    def _next_ids(self, n: int) -> list[str]:
        self._run_id += 1
        return [f"r{self._run_id}-{i}" for i in range(n)]

    def __enter__(self) -> EngineSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class OfflineSession(EngineSession):
    mode = "offline"

    def _start(self) -> None:
        from vllm.engine.arg_utils import EngineArgs
        from vllm.v1.engine.llm_engine import LLMEngine

        self.engine = LLMEngine.from_engine_args(EngineArgs(**self.engine_args))

    def vocab_size(self) -> int:
        return int(self.engine.model_config.get_vocab_size())

    def _engine_control(self, request: ControlRequest) -> list[ProcessReport]:
        return list(self.engine.engine_core.call_utility(CONTROL_METHOD, request))

    def run(
        self,
        requests: list[RequestSpec],
        offsets: list[float],
        sampling: Sampling,
        concurrency: int | None = None,
        progress: Progress | None = None,
    ) -> tuple[list[RequestTiming], float]:
        self.check_alive()
        ids = self._next_ids(len(requests))
        timings = {rid: RequestTiming(len(spec.prompt_token_ids), 0.0) for rid, spec in zip(ids, requests, strict=True)}
        start = time.perf_counter()
        for rid, spec in zip(ids, requests, strict=True):
            timings[rid].sent = time.perf_counter()
            self.engine.add_request(rid, engine_input(spec), sampling_params(sampling, spec.max_tokens))
        finished = 0
        while self.engine.has_unfinished_requests():
            outputs = self.engine.step()
            now = time.perf_counter()
            for output in outputs:
                record_output(timings[output.request_id], output, now)
                finished += bool(output.finished)
            if progress is not None and outputs:
                progress(finished)
        return list(timings.values()), time.perf_counter() - start

    def reset_prefix_cache(self) -> bool:
        self.check_alive()
        return bool(self.engine.reset_prefix_cache())

    def _wake_waiters(self, error: EngineError) -> None:
        # The sync client blocks in get_output() on a queue and in call_utility() on futures.
        core = getattr(getattr(self, "engine", None), "engine_core", None)
        fail_utility_calls(core, error)
        queue = getattr(core, "outputs_queue", None)
        if queue is not None:
            queue.put_nowait(error)

    def _stop(self) -> None:
        engine = getattr(self, "engine", None)
        if engine is not None:
            self.engine = None
            engine.engine_core.shutdown()


def freeze_startup_heap() -> None:
    """Freeze this process's heap as vLLM's OpenAI server freezes its own once it has started (its launcher calls
    ``vllm.utils.gc_utils.freeze_gc_heap``, in every supported release). A streaming session stands in for that
    server's front-end, so its collections scan what serving makes, not every module and the engine client loaded
    at start: left unfrozen, a full collection of that heap (about 0.5 s on the CPU engine, the tool's records in it)
    stalled a run in-process, as no deployed server would. Called through vLLM's module, so that the ``gc_freeze``
    strategy's ``enabled: false``, which suppresses the server's freeze, suppresses this one too."""
    from vllm.utils import gc_utils

    gc_utils.freeze_gc_heap()


class StreamingSession(EngineSession):
    mode = "streaming"

    def _start(self) -> None:
        self._loop = asyncio.Runner()
        self.engine = self._loop.run(self._create())
        freeze_startup_heap()

    async def _create(self) -> Any:
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        return AsyncLLM.from_engine_args(AsyncEngineArgs(**self.engine_args))

    def vocab_size(self) -> int:
        return int(self.engine.model_config.get_vocab_size())

    def _engine_control(self, request: ControlRequest) -> list[ProcessReport]:
        return self._loop.run(control_every_engine(self.engine.engine_core, request))

    def run(
        self,
        requests: list[RequestSpec],
        offsets: list[float],
        sampling: Sampling,
        concurrency: int | None = None,
        progress: Progress | None = None,
    ) -> tuple[list[RequestTiming], float]:
        self.check_alive()
        try:
            return self._loop.run(self._run(requests, offsets, sampling, concurrency, progress))
        except Exception as exc:
            if self.died.is_set() or type(exc).__name__ == "EngineDeadError":
                raise EngineError(f"an engine process died while requests were running ({exc!r})") from exc
            raise

    async def _run(
        self,
        requests: list[RequestSpec],
        offsets: list[float],
        sampling: Sampling,
        concurrency: int | None,
        progress: Progress | None,
    ) -> tuple[list[RequestTiming], float]:
        async def stream(rid: str, spec: RequestSpec, timing: RequestTiming) -> None:
            prompt = engine_input(spec)
            async for output in self.engine.generate(prompt, sampling_params(sampling, spec.max_tokens), rid):
                record_output(timing, output, time.perf_counter())

        return await drive_requests(self._next_ids(len(requests)), requests, offsets, stream, concurrency, progress)

    def reset_prefix_cache(self) -> bool:
        self.check_alive()
        return bool(self._loop.run(self.engine.reset_prefix_cache()))

    def _stop(self) -> None:
        engine = getattr(self, "engine", None)
        if engine is not None:
            self.engine = None
            try:
                self._loop.run(self._shutdown(engine))
            finally:
                self._loop.close()
                gc.unfreeze()  # what this engine left alive goes back to the collector

    def _wake_waiters(self, error: EngineError) -> None:
        # AsyncLLM fails its request streams itself once vLLM notices; utility calls it leaves pending.
        core = getattr(getattr(self, "engine", None), "engine_core", None)
        with contextlib.suppress(RuntimeError):  # the loop is already closed
            self._loop.get_loop().call_soon_threadsafe(fail_utility_calls, core, error)

    async def _shutdown(self, engine: Any) -> None:
        engine.shutdown()
