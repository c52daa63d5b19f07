"""CI benchmark series: one module per command (``export``: ``tuner export bench``, ``history``, ``pr_check``,
``dashboard``) over what they share: ``entries`` (the exported entry format) and ``stored`` (stored series, from a
gh-pages ``data.js`` or a directory of exports).

The face lists what the commands share; the commands are imported from their modules.
"""

from tuner.series.entries import BENCH_ENTRY_SCHEMA, KINDS, TOOLS, BenchEntry, Better, better_of, read_entries, validate
from tuner.series.stored import Point, Series, load_series, select

__all__ = [
    "BENCH_ENTRY_SCHEMA",
    "KINDS",
    "TOOLS",
    "BenchEntry",
    "Better",
    "Point",
    "Series",
    "better_of",
    "load_series",
    "read_entries",
    "select",
    "validate",
]
