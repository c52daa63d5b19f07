"""Metrics: the table of every metric, per-request timings, and tail latency explained."""
