"""tuner: benchmark and tune the host-side (Python) performance of a live vLLM engine."""

__version__ = "0.1.0"
