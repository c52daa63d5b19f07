"""The report's "Workload" section: what traffic a verdict holds for, in words, a table and one plot."""

from __future__ import annotations

from pathlib import Path

from tuner.results.document import Doc
from tuner.traffic.workload_record import WorkloadRecord

PLOT = "workload.png"


def describe(record: WorkloadRecord) -> list[str]:
    """One line per fact: where the requests came from, what of the file was used, how they were sent."""
    shape = record["shape"]
    lines = []
    dataset = record["dataset"]
    if dataset is None:
        lines.append(f"synthetic requests: {shape['requests']:,}")
    else:
        lines.append(f"dataset: {dataset['path']} ({dataset['format']}, sha256 {dataset['sha256'][:12]}…)")
        read = "the whole file" if dataset["read_to_end"] else "until the selection was complete"
        lines.append(
            f"requests: {dataset['requests']:,} replayed of {dataset['records_read']:,} good records read ({read}; "
            f"sample: {dataset['sample']})"
        )
        left_out = [
            f"{dataset['bad_skipped']:,} bad records skipped" if dataset["bad_skipped"] else "",
            f"{dataset['before_window']:,} before the window" if dataset["before_window"] else "",
            f"{dataset['clipped']:,} clipped to max_model_len" if dataset["clipped"] else "",
        ]
        if any(left_out):
            lines.append("left out or changed: " + ", ".join(part for part in left_out if part))
        lines += [f"  {example}" for example in dataset["bad_examples"][:5]]
    lines.append(f"sent: {record['replay']}")
    arrivals = shape["arrivals"]
    if arrivals is not None:
        lines.append(
            f"arrivals: {arrivals['duration_s']:.1f} s, mean {arrivals['mean_rate']:.2f} requests/s, peak "
            f"{arrivals['peak_rate']:.2f} (per {arrivals['bin_s']:g} s)"
        )
    if shape["prefix_reuse"] is not None:
        lines.append(f"prefix reuse: {shape['prefix_reuse']:.1%} of hash-id blocks were seen in an earlier request")
    return lines


def length_rows(record: WorkloadRecord) -> list[list[str]]:
    shape = record["shape"]
    return [
        [label, *(f"{v:,.0f}" for v in (d["min"], d["p50"], d["p90"], d["p99"], d["max"], d["mean"], d["total"]))]
        for label, d in (("prompt tokens", shape["input_tokens"]), ("output tokens", shape["output_tokens"]))
    ]


def workload_section(doc: Doc, out: Path, record: WorkloadRecord | None, *, title: str) -> None:
    """The section, with ``workload.png`` in ``out``; nothing for results written before workloads were recorded."""
    from tuner.results import plots

    if record is None:
        return
    doc.h("Workload")
    doc.bullets(describe(record))
    doc.table(["", "min", "p50", "p90", "p99", "max", "mean", "total"], length_rows(record))
    doc.image(
        plots.workload_shape(out / PLOT, record["shape"], title=title),
        "Prompt and output lengths of the requests replayed, and how many were sent per second.",
    )
