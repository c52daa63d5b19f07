"""The plugin's control endpoint inside a vLLM API-server process (``mode: serve``).

A server's EngineCore is reachable only from the process that built its ``AsyncLLM``, so when the tuner starts
a server it asks the plugin (``control`` in ``TUNER_PLUGIN``) to open ``POST http://127.0.0.1:PORT/control``
there. The body is a control request (see :data:`tuner.plugin.protocol.CONTROL_METHOD`); the answer is a JSON list
of reports: the API server's first, then EngineCore's and every worker's.

Only the tuner that started the server can use it:

- the process that serves it binds port 0 on loopback itself (no port chosen by someone else and bound later,
  which another local process could take first) and reports the port through ``port_file``, created exclusively;
- every request must carry the random token handed over in the plugin spec (``Authorization: Bearer TOKEN``),
  compared in constant time; a request without it is refused before anything is read or changed;
- bodies are limited to :data:`MAX_BODY_BYTES`; callers other than loopback are refused.

A production ``vllm serve`` with a strategy set opens nothing: the spec then has no ``control``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import json
import logging
import os
import tempfile
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tuner.plugin.protocol import (
    ControlEndpointSpec,
    ControlRequest,
    ProcessReport,
    as_control_request,
    control_every_engine,
)

HOST = "127.0.0.1"
ENGINE_TIMEOUT_S = 120.0
MAX_BODY_BYTES = 1 << 20
logger = logging.getLogger("tuner.plugin")


def write_port_file(path: Path, port: int) -> None:
    """Publish ``port`` at ``path`` atomically, and only if no other process did (``FileExistsError`` then)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(str(port))
        os.link(tmp, path)  # fails if the file exists: one API-server process serves the control endpoint
    finally:
        os.unlink(tmp)


def make_handler(token: str, answer: Any) -> type[BaseHTTPRequestHandler]:
    """The request handler: loopback callers with the token, bodies up to the limit, ``POST /control`` only."""
    expected = f"Bearer {token}".encode()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            if not ipaddress.ip_address(self.client_address[0]).is_loopback:
                self._reply(403, {"error": "loopback callers only"})
                return
            given = self.headers.get("Authorization", "").encode()
            if not hmac.compare_digest(given, expected):
                self._reply(401, {"error": "missing or wrong token"})
                return
            if self.path != "/control":
                self._reply(404, {"error": f"no such path {self.path}"})
                return
            try:
                length = int(self.headers.get("Content-Length", "0"))
            except ValueError:
                length = -1
            if not 0 <= length <= MAX_BODY_BYTES:
                self._reply(413, {"error": f"the body must be 0 to {MAX_BODY_BYTES} bytes"})
                return
            try:
                self._reply(200, answer(as_control_request(json.loads(self.rfile.read(length)))))
            except Exception as exc:  # reported to the tuner, which fails the run with it
                self._reply(500, {"error": f"{type(exc).__name__}: {exc}"})

        def _reply(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            with contextlib.suppress(OSError):  # the caller went away
                self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the server's own log is for vLLM."""

    return Handler


def serve_control(token: str, port_file: Path, answer: Any) -> ThreadingHTTPServer:
    """Bind a loopback port, publish it in ``port_file`` and serve ``answer(request)`` on a daemon thread."""
    server = ThreadingHTTPServer((HOST, 0), make_handler(token, answer))
    try:
        write_port_file(port_file, server.server_address[1])
    except BaseException:
        server.server_close()
        raise
    threading.Thread(target=server.serve_forever, name="tuner-control", daemon=True).start()
    logger.info("tuner: control endpoint on http://%s:%d/control", HOST, server.server_address[1])
    return server


def start_control_endpoint(
    handle: Callable[[ControlRequest], ProcessReport], engine: Any, control: ControlEndpointSpec
) -> ThreadingHTTPServer:
    """Serve control requests for this process (``handle``) and ``engine`` (an ``AsyncLLM``).

    Must be called on the server's event loop (from ``AsyncLLM.__init__``): EngineCore utility calls are
    scheduled on that loop from the HTTP thread.
    """
    loop = asyncio.get_running_loop()

    def answer(request: ControlRequest) -> list[ProcessReport]:
        reports = [handle(request)]
        call = control_every_engine(engine.engine_core, request)
        return reports + asyncio.run_coroutine_threadsafe(call, loop).result(timeout=ENGINE_TIMEOUT_S)

    return serve_control(str(control["token"]), Path(control["port_file"]), answer)
