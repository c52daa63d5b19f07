"""What is on disk, with no engine and no command: ``loader`` (the typed records ``run.json`` and
``sweep/summary.json`` hold, and their one loader), ``upgrade`` (older files brought to the current layout, so that
every field is present after loading), ``values`` (the numbers readers take out of loaded records), ``files`` (where
result files go, and the one atomic writer) and ``calibration`` (the calibration record and its file).

The face lists what the other packages use.
"""

from tuner.records.calibration import (
    CALIBRATION_SCHEMA,
    Calibration,
    calibration_path,
    cost_line,
    engine_s_per_pct,
    load_calibration,
    save_calibration,
)
from tuner.records.files import (
    destination_problem,
    new_run_dir,
    write_bytes,
    write_json,
    write_json_keeping,
    write_text,
)
from tuner.records.loader import (
    RUN_SCHEMA,
    SWEEP_SCHEMA,
    Loaded,
    Repetition,
    RunRecord,
    SweepSummary,
    TrialFields,
    TrialRow,
    TrialState,
    Winner,
    load,
)

__all__ = [
    "CALIBRATION_SCHEMA",
    "RUN_SCHEMA",
    "SWEEP_SCHEMA",
    "Calibration",
    "Loaded",
    "Repetition",
    "RunRecord",
    "SweepSummary",
    "TrialFields",
    "TrialRow",
    "TrialState",
    "Winner",
    "calibration_path",
    "cost_line",
    "destination_problem",
    "engine_s_per_pct",
    "load",
    "load_calibration",
    "new_run_dir",
    "save_calibration",
    "write_bytes",
    "write_json",
    "write_json_keeping",
    "write_text",
]
