"""``tuner report``: a Markdown + self-contained HTML report with PNG plots for a run or a sweep.

Inputs (each versioned by its ``schema`` key, see ``docs/records.md``):

- a run: ``<run dir>/run.json`` (``tuner.run/1``), given as the directory or the file;
- a sweep: ``<experiment>/sweep/summary.json`` (``tuner.sweep/1``), given as the experiment directory, the
  ``sweep/`` directory or the file;
- a capacity search: ``<experiment>/capacity/capacity.json`` (``tuner.capacity/1``), given as its directory or
  the file; its report goes beside it (:mod:`tuner.report.capacity`).

The report goes next to the input: ``<run dir>/report/`` for a run, ``<experiment>/report/`` for a sweep
(``report-aa/`` for an A/A sweep in ``sweep-aa/``). Every file is written atomically.

Records come from :func:`tuner.records.loader.load`, wording from :mod:`tuner.report.describe`, the document
model from :mod:`tuner.report.document`.
"""

from __future__ import annotations

from pathlib import Path

from tuner.records import Loaded, capacity_file, load, load_capacity, write_text
from tuner.report.capacity import write_capacity_report
from tuner.report.run import run_doc
from tuner.report.sweep import sweep_doc


def report_dir(loaded: Loaded) -> Path:
    """Where the report of ``loaded`` goes (next to the input)."""
    if loaded.kind == "run":
        return loaded.path.parent / "report"
    sweep_dir = loaded.path.parent
    if sweep_dir.name.startswith("sweep"):
        return sweep_dir.parent / ("report" + sweep_dir.name[len("sweep") :])
    return sweep_dir / "report"


def build_report(path: Path, out_dir: Path | None = None) -> list[Path]:
    """Write ``report.md``, ``report.html`` and the PNG plots for the result at ``path``; return the paths."""
    if (capacity := capacity_file(path)) is not None:  # beside its record, as `tuner capacity` wrote it
        return write_capacity_report(out_dir or capacity.parent, load_capacity(capacity))
    loaded = load(path)
    out = out_dir or report_dir(loaded)
    out.mkdir(parents=True, exist_ok=True)
    doc = run_doc(loaded, out) if loaded.kind == "run" else sweep_doc(loaded, out)
    images = [block[1] for block in doc.blocks if block[0] == "img"]
    md = write_text(out / "report.md", doc.markdown())
    page = write_text(out / "report.html", doc.html())
    return [md, page, *images]
