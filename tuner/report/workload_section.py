"""The report's "Workload" section: what traffic a verdict holds for, in words, a table and one plot."""

from __future__ import annotations

from pathlib import Path

from tuner.report.document import Doc
from tuner.traffic import DatasetRecord, WorkloadRecord, WorkloadShape

PLOT = "workload.png"


def clip_line(dataset: DatasetRecord) -> str:
    """What ``too_long: clip`` did: prompts shortened, and how many outputs had to be shortened too."""
    outputs = dataset["output_clipped"]
    also = f"; {outputs:,} of them also lost output tokens" if outputs else ""
    return f"{dataset['clipped']:,} clipped to max_model_len (prompt first{also})"


def describe_workload(record: WorkloadRecord) -> list[str]:
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
            clip_line(dataset) if dataset["clipped"] else "",
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
    if record is None:
        return
    doc.h("Workload")
    doc.bullets(describe_workload(record))
    doc.table(["", "min", "p50", "p90", "p99", "max", "mean", "total"], length_rows(record))
    doc.image(
        workload_plot(out / PLOT, record["shape"], title=title),
        "Prompt and output lengths of the requests replayed, and how many were sent per second.",
    )


def workload_plot(path: Path, shape: WorkloadShape, *, title: str) -> Path:
    """The traffic a result holds for: prompt and output length histograms, and requests sent per second over
    time (or a note that all were sent at once)."""
    from matplotlib.ticker import EngFormatter

    from tuner.report.figures import SERIES_COLORS, new_figure, save_figure

    fig = new_figure(11, 3.4)
    axes = fig.subplots(1, 3)
    for ax, histogram, label, color in (
        (axes[0], shape["input_histogram"], "prompt tokens", SERIES_COLORS[0]),
        (axes[1], shape["output_histogram"], "output tokens", SERIES_COLORS[1]),
    ):
        ax.stairs(histogram["counts"], histogram["edges"], fill=True, color=color, alpha=0.8)
        ax.xaxis.set_major_formatter(EngFormatter(sep=""))  # 120k, not 120000: long-context ticks stay apart
        ax.set_xlabel(label)
        ax.set_ylabel("requests")
    arrivals = shape["arrivals"]
    ax = axes[2]
    if arrivals is None:
        ax.text(0.5, 0.5, "all requests sent at once", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
    else:
        width = arrivals["bin_s"]
        rates = [c / width for c in arrivals["counts"]]
        ax.stairs(rates, [i * width for i in range(len(rates) + 1)], fill=True, color=SERIES_COLORS[2], alpha=0.8)
        ax.axhline(arrivals["mean_rate"], color="grey", ls="--", lw=0.8)
        ax.set_xlabel("seconds since the first request")
        ax.set_ylabel(f"requests/s (per {width:g} s)")
    fig.suptitle(f"{title}: {shape['requests']:,} requests")
    return save_figure(fig, path)
