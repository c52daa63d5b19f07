"""``mode: serve``: measure through vLLM's OpenAI-compatible HTTP server, like ``vllm bench serve``.

- :class:`ServerSession` starts ``vllm serve`` (:mod:`tuner.engine.serve_entry`) with the plugin enabled, so
  strategies apply in the API server, EngineCore and every worker, waits for ``/health``, and reaches the plugin
  through the loopback control endpoint the plugin opens in the API-server process
  (:mod:`tuner.plugin.control_endpoint`). It always stops the server and everything it spawned, also after Ctrl-C or a
  failed trial.
- :class:`EndpointSession` measures a server someone else started, from outside: throughput and latencies, but
  no strategies and no per-process telemetry.

Requests stream from ``/v1/completions`` with token-id prompts and ``return_token_ids``, one chunk per token.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from tuner.config import Sampling, Serve
from tuner.engine.requests import Progress, drive_requests
from tuner.engine.session import EngineError, EngineSession
from tuner.metrics import RequestTiming
from tuner.plugin.protocol import ENV_VAR, ControlEndpointSpec, ControlRequest, ProcessReport, decode_spec, encode_spec
from tuner.traffic import RequestSpec
from tuner.vllm import cli_flags

MODEL_NAME = "tuner-model"  # the served model name when the engine args do not set one
HOST = "127.0.0.1"
STOP_GRACE_S = 30.0
CONTROL_READY_S = 30.0  # the plugin publishes its port when the server's engine is built
# No read limit of our own: a sweep's trial time limit bounds a hung server; connecting must be quick.
STREAM_TIMEOUT = httpx.Timeout(None, connect=30.0)


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def server_command(engine_args: dict[str, Any], port: int, extra: list[str]) -> list[str]:
    """The ``vllm serve`` command line for ``engine_args``, through the entry point the installed vLLM documents."""
    command = [sys.executable, "-m", "tuner.engine.serve_entry", "--host", HOST, "--port", str(port)]
    return command + cli_flags({"served_model_name": MODEL_NAME, **engine_args}) + extra


def model_vocab_size(engine_args: dict[str, Any]) -> int:
    """The vocabulary size of the served model, from its config (prompts are random ids below it)."""
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(
            engine_args["model"], trust_remote_code=bool(engine_args.get("trust_remote_code"))
        )
    except Exception as exc:  # not cached offline, gated, malformed
        raise EngineError(f"cannot read the config of {engine_args['model']}: {exc}") from exc
    return int(config.get_text_config().vocab_size)


def completion_payload(model: str, spec: RequestSpec, sampling: Sampling) -> dict[str, Any]:
    """A streaming ``/v1/completions`` body, with vLLM's extensions for token ids and ``ignore_eos``."""
    payload: dict[str, Any] = {
        "model": model,
        "prompt": spec.prompt_token_ids,
        "max_tokens": spec.max_tokens,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "top_k": sampling.top_k if sampling.top_k > 0 else -1,
        "ignore_eos": sampling.ignore_eos,
        "stream": True,
        "return_token_ids": True,
    }
    if sampling.seed is not None:
        payload["seed"] = sampling.seed
    return payload


def record_chunk(timing: RequestTiming, chunk: dict[str, Any], now: float) -> None:
    """Add one server-sent completion chunk to ``timing``."""
    for choice in chunk.get("choices", []):
        ids = choice.get("token_ids")
        if ids is None:  # a server without vLLM's return_token_ids: one token per non-empty chunk
            ids, count = [], int(bool(choice.get("text")))
        else:
            count = len(ids)
        if count:
            timing.chunk_times.append(now)
            timing.chunk_tokens.append(count)
            timing.token_ids.extend(ids)
        if choice.get("finish_reason") is not None:
            timing.finished = now


def sse_data(line: str) -> dict[str, Any] | None:
    """The JSON payload of a server-sent-events ``data:`` line; None for other lines and ``[DONE]``."""
    if not line.startswith("data:"):
        return None
    data = line.removeprefix("data:").strip()
    return None if data == "[DONE]" else json.loads(data)


@contextlib.contextmanager
def heap_kept_from_the_collector() -> Iterator[None]:
    """The client's heap kept from Python's cyclic collector while a served run is timed: every object alive when it
    begins is frozen (``gc.freeze``), so a collection during the run scans only what the run made, and unfrozen when
    it ends, so garbage among them is collected between runs. A full collection of the client's heap, a capacity
    search's records in it, took 0.36-0.40 s with every thread of the client stopped; one fell into about one run a
    search, where nothing streamed for as long and half the requests missed a 200 ms TTFT target (the rounds beside
    met every one). Only where the client is the process's whole work: in-process, vLLM's front-end shares the
    tool's process, and strategies act on its collector."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


class HttpSession(EngineSession):
    """Streams the workload to an OpenAI-compatible server at ``self.url``."""

    local_frontend = False
    url: str
    model_name: str

    def vocab_size(self) -> int:
        return model_vocab_size(self.engine_args)

    def run(
        self,
        requests: list[RequestSpec],
        offsets: list[float],
        sampling: Sampling,
        concurrency: int | None = None,
        progress: Progress | None = None,
    ) -> tuple[list[RequestTiming], float]:
        self.check_alive()
        errors: list[str] = []
        with heap_kept_from_the_collector():
            timings, wall = asyncio.run(self._run(requests, offsets, sampling, concurrency, progress, errors))
        if errors and len(errors) == len(requests):
            raise EngineError(f"every request to {self.url} failed; the first: {errors[0]}")
        return timings, wall

    async def _run(
        self,
        requests: list[RequestSpec],
        offsets: list[float],
        sampling: Sampling,
        concurrency: int | None,
        progress: Progress | None,
        errors: list[str],
    ) -> tuple[list[RequestTiming], float]:
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        async with httpx.AsyncClient(base_url=self.url, timeout=STREAM_TIMEOUT, limits=limits) as client:

            async def stream(rid: str, spec: RequestSpec, timing: RequestTiming) -> None:
                body = completion_payload(self.model_name, spec, sampling)
                try:
                    async with client.stream("POST", "/v1/completions", json=body) as response:
                        if response.status_code != 200:
                            errors.append(f"HTTP {response.status_code}: {(await response.aread()).decode()[:300]}")
                            return
                        async for line in response.aiter_lines():
                            chunk = sse_data(line)
                            if chunk is not None:
                                record_chunk(timing, chunk, time.perf_counter())
                except httpx.HTTPError as exc:  # the request counts as failed; the repetition goes on
                    errors.append(f"{type(exc).__name__}: {exc}")

            ids = self._next_ids(len(requests))
            return await self._until_dead(drive_requests(ids, requests, offsets, stream, concurrency, progress))

    def reset_prefix_cache(self) -> bool:
        """vLLM's development endpoint, which servers the tuner starts expose (``VLLM_SERVER_DEV_MODE``)."""
        self.check_alive()
        try:
            return httpx.post(f"{self.url}/reset_prefix_cache", timeout=30.0).status_code == 200
        except httpx.HTTPError:
            return False

    async def _until_dead(self, work: Any) -> Any:
        """Await ``work``, but give up as soon as a watched server process dies."""
        task = asyncio.ensure_future(work)
        while not task.done():
            await asyncio.wait({task}, timeout=0.5)
            if self.died.is_set() and not task.done():
                task.cancel()
                raise EngineError("the vLLM server died while requests were running (see its log)")
        return task.result()


def autogroup_nice(pid: int | str) -> int | None:
    """The nice of process ``pid``'s autogroup (``/proc/<pid>/autogroup`` reads ``/autogroup-N nice K``), or None
    where there is none to read: autogroups off, not Linux, the process gone, or a sandboxed kernel whose file is
    empty."""
    try:
        fields = Path(f"/proc/{pid}/autogroup").read_text().split()
    except OSError:
        return None
    return int(fields[-1]) if len(fields) == 3 and fields[1] == "nice" and fields[-1].lstrip("-").isdigit() else None


def lower_priority(pid: int, nice: int) -> None:
    """Run process ``pid`` (the leader of a session of its own) ``nice`` steps below this process on the CPU: its
    session's autogroup, which Linux schedules against this one's whatever the nice of their threads, and its own
    nice, which the threads and processes it starts later inherit (what counts where autogroups are off). A served
    run's TTFT is the client's clock: on a 2-core host the client waited 2.6 s for a CPU in a 2.3 s run (its
    threads together, median) behind the server's processes at vLLM's defaults, 10 ms with the server 10 below (see
    docs/serving.md). Best effort: a host that offers neither leaves the server as it is."""
    if nice <= 0:
        return
    ours = autogroup_nice("self")
    if ours is not None:
        with contextlib.suppress(OSError):
            Path(f"/proc/{pid}/autogroup").write_text(str(min(19, ours + nice)))
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, pid, min(19, os.getpriority(os.PRIO_PROCESS, 0) + nice))


class ServerSession(HttpSession):
    """A vLLM API server started (and always stopped) by the tuner, with the plugin in every process."""

    mode = "serve"

    def __init__(
        self, engine_args: dict[str, Any], plugin_spec: str, serve: Serve, env: dict[str, str] | None = None
    ) -> None:
        self.serve = serve
        super().__init__(engine_args, plugin_spec, env)

    def _start(self) -> None:
        port = free_port()
        self.url = f"http://{HOST}:{port}"
        self.model_name = str(_first(self.engine_args.get("served_model_name")) or MODEL_NAME)
        workdir = Path(tempfile.mkdtemp(prefix="tuner-serve-"))  # 0700: the port file is ours alone
        self.control_token = secrets.token_urlsafe(32)
        self.port_file = workdir / "control-port"
        self.control_port: int | None = None
        spec = decode_spec(self.plugin_spec)
        control: ControlEndpointSpec = {"token": self.control_token, "port_file": str(self.port_file)}
        with_control = encode_spec(spec["strategies"], spec["install"], control)
        self.log_path = workdir / "server.log"
        with self.log_path.open("wb") as log:
            # Its own session: Ctrl-C reaches the tuner only, which then stops the server in order.
            self.server = subprocess.Popen(
                server_command(self.engine_args, port, self.serve.args),
                # Development endpoints (bound to the loopback address): /reset_prefix_cache between replays.
                env={**os.environ, ENV_VAR: with_control, "VLLM_SERVER_DEV_MODE": "1"},
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        lower_priority(self.server.pid, self.serve.server_nice)
        self._wait_healthy()

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.serve.ready_timeout_s
        while time.monotonic() < deadline:
            if self.server.poll() is not None:
                raise EngineError(f"the vLLM server exited with status {self.server.returncode}:\n{self.log_tail()}")
            try:
                if httpx.get(f"{self.url}/health", timeout=2.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise EngineError(f"the vLLM server was not healthy after {self.serve.ready_timeout_s:g} s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 25) -> str:
        """The last lines of the server's log (its path first)."""
        text = self.log_path.read_text(errors="replace").splitlines()[-lines:]
        return "\n".join([f"(log: {self.log_path})", *text])

    def _control_url(self) -> str:
        """The control endpoint the plugin published (it binds its own port, then writes it to the port file)."""
        if self.control_port is None:
            deadline = time.monotonic() + CONTROL_READY_S
            while not self.port_file.exists():
                if time.monotonic() > deadline:
                    raise EngineError(
                        "the tuner plugin in the server opened no control endpoint; "
                        "is this package installed in the server's Python?"
                    )
                time.sleep(0.1)
            self.control_port = int(self.port_file.read_text())
        return f"http://{HOST}:{self.control_port}/control"

    def _engine_control(self, request: ControlRequest) -> list[ProcessReport]:
        url = self._control_url()
        headers = {"Authorization": f"Bearer {self.control_token}"}
        try:
            response = httpx.post(url, json=request, headers=headers, timeout=120.0)
        except httpx.HTTPError as exc:
            raise EngineError(f"the tuner plugin in the server does not answer at {url} ({exc})") from exc
        body = response.json()
        if response.status_code != 200:
            raise EngineError(f"control request {request.get('op')!r} failed in the server: {body.get('error')}")
        return list(body)

    def _stop(self) -> None:
        server = getattr(self, "server", None)
        if server is None or server.poll() is not None:
            return
        os.killpg(server.pid, signal.SIGTERM)  # vLLM shuts EngineCore and the workers down on SIGTERM
        try:
            server.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


class EndpointSession(HttpSession):
    """A server the tuner did not start: measured from outside, nothing switched, no telemetry."""

    mode = "endpoint"

    def __init__(self, engine_args: dict[str, Any], plugin_spec: str, serve: Serve) -> None:
        assert serve.endpoint is not None
        self.url = serve.endpoint
        super().__init__(engine_args, plugin_spec)

    def _start(self) -> None:
        try:
            response = httpx.get(f"{self.url}/v1/models", timeout=10.0)
            models = [m["id"] for m in response.json()["data"]]
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            raise EngineError(f"cannot list the models of {self.url}/v1/models: {exc}") from exc
        if not models:
            raise EngineError(f"{self.url} serves no model")
        self.model_name = models[0]

    def _engine_control(self, request: ControlRequest) -> list[ProcessReport]:
        return []  # no plugin of ours there: no per-process reports

    def _stop(self) -> None:
        """Someone else's server keeps running."""


def _first(value: Any) -> Any:
    return value[0] if isinstance(value, list) and value else value
