"""The plugin's control endpoint inside a vLLM API-server process (``mode: serve``).

A server's EngineCore is reachable only from the process that built its ``AsyncLLM``, so when the tuner starts
a server it asks the plugin (``control_port`` in ``TUNER_PLUGIN``) to open ``POST http://127.0.0.1:PORT/control``
there. The body is a control request (see :meth:`tuner.plugin.ProcessState.handle`); the answer is a JSON list
of reports: the API server's first, then EngineCore's and every worker's. It listens on loopback only, and
only when the tuner asked for it: a production ``vllm serve`` with a strategy set opens nothing.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tuner.plugin import ProcessState

HOST = "127.0.0.1"
ENGINE_TIMEOUT_S = 120.0
logger = logging.getLogger("tuner.plugin")


def start_control_server(state: ProcessState, engine: Any, port: int) -> None:
    """Serve control requests for ``state`` (this process) and ``engine`` (an ``AsyncLLM``) on ``port``.

    Must be called on the server's event loop (from ``AsyncLLM.__init__``): EngineCore utility calls are
    scheduled on that loop from the HTTP thread.
    """
    from tuner.plugin import CONTROL_METHOD

    loop = asyncio.get_running_loop()

    def answer(request: dict[str, Any]) -> list[dict[str, Any]]:
        reports = [state.handle(request)]
        call = engine.engine_core.call_utility_async(CONTROL_METHOD, request)
        return reports + list(asyncio.run_coroutine_threadsafe(call, loop).result(timeout=ENGINE_TIMEOUT_S))

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            if self.path != "/control":
                self._reply(404, {"error": f"no such path {self.path}"})
                return
            try:
                request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                self._reply(200, answer(request))
            except Exception as exc:  # reported to the tuner, which fails the run with it
                self._reply(500, {"error": f"{type(exc).__name__}: {exc}"})

        def _reply(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the server's own log is for vLLM."""

    server = ThreadingHTTPServer((HOST, port), Handler)
    threading.Thread(target=server.serve_forever, name="tuner-control", daemon=True).start()
    logger.info("tuner: control endpoint on http://%s:%d/control", HOST, port)
