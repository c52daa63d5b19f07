"""Everything rendered from records: ``tuner report`` (``run``, which renders a sweep with ``sweep``) and ``tuner
compare`` (``compare``), and what they share: ``describe`` (results in words and numbers), ``document`` (the
Markdown and HTML document), the sections (``sections``, ``stall_section``, ``tail_section``, ``upstream_section``,
``workload_section``), the calibration's report (``calibration``) and the plots (``figures``, the canvas and
palette; ``run_plots``, ``sweep_plots`` and ``gc_plots``, GC and the tail).

The face lists what the other packages use of results in words, the document and the calibration's report; the
commands, the sections and the plots (which load matplotlib) are imported from their modules.
"""

from tuner.report.calibration import write_calibration_report
from tuner.report.describe import (
    describe_engine,
    describe_strategies,
    fmt_ci,
    fmt_ratio,
    measured_by,
    verdict_words,
)
from tuner.report.document import Doc

__all__ = [
    "Doc",
    "describe_engine",
    "describe_strategies",
    "fmt_ci",
    "fmt_ratio",
    "measured_by",
    "verdict_words",
    "write_calibration_report",
]
