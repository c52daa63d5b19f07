"""Everything rendered from records: ``tuner report`` (``build``: a run's report with ``run``, a sweep's with
``sweep``, a capacity search's with ``capacity``) and ``tuner compare`` (``compare``), and what they share:
``describe`` (results in words and numbers), ``document`` (the Markdown and HTML document), the sections
(``sections``, ``confirmation_section``, ``stall_section``, ``tail_section``, ``upstream_section``,
``workload_section``), the calibration's report (``calibration``) and the plots (``figures``, the canvas and
palette; ``run_plots``, ``sweep_plots`` and ``gc_plots``, GC and the tail).

The face lists what the other packages use of results in words, the document and the calibration's report; the
commands, the sections and the plots (which load matplotlib) are imported from their modules.
"""

from tuner.report.calibration import write_calibration_report
from tuner.report.capacity import LEVEL_COLUMNS, level_rows, write_capacity_report
from tuner.report.describe import (
    UNBOUNDED,
    baseline_trial,
    describe_engine,
    describe_strategies,
    fmt_ci,
    fmt_ratio,
    measured_by,
    measured_device,
    ratio_metrics,
    verdict_words,
    vllm_version,
)
from tuner.report.document import Doc
from tuner.report.figures import SERIES_COLORS, VERDICT_COLORS, new_figure, save_figure
from tuner.report.workload_section import PLOT, describe_workload, length_rows, workload_plot

__all__ = [
    "LEVEL_COLUMNS",
    "PLOT",
    "SERIES_COLORS",
    "UNBOUNDED",
    "VERDICT_COLORS",
    "Doc",
    "baseline_trial",
    "describe_engine",
    "describe_strategies",
    "describe_workload",
    "fmt_ci",
    "fmt_ratio",
    "length_rows",
    "level_rows",
    "measured_by",
    "measured_device",
    "new_figure",
    "ratio_metrics",
    "save_figure",
    "verdict_words",
    "vllm_version",
    "workload_plot",
    "write_calibration_report",
    "write_capacity_report",
]
