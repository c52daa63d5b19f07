"""A live vLLM engine, started with the plugin enabled: in process (:class:`OfflineSession` for ``rate: inf``,
:class:`StreamingSession` for a rate or a concurrency) or behind vLLM's OpenAI server (:class:`ServerSession`).

``session`` (the in-process sessions and their interface), ``server`` (``mode: serve``), ``serve_entry`` (``vllm
serve`` started through its documented entry point), ``processes`` (an engine's processes: which live, and the
watch that ends a start when one dies) and ``requests`` (requests sent at their offsets, streamed outputs timed).
"""

from tuner.engine.server import EndpointSession, ServerSession
from tuner.engine.session import EngineError, EngineSession, OfflineSession, StreamingSession

__all__ = ["EndpointSession", "EngineError", "EngineSession", "OfflineSession", "ServerSession", "StreamingSession"]
