"""The sentence a capacity search ends with: how much more load the configuration serves within the SLO."""

from __future__ import annotations

from tuner.config import LoadKnob
from tuner.stats import CapacityEstimateRecord

_WHAT = {
    LoadKnob.SPEED: ("more", "less", "traffic (replay speed)"),
    LoadKnob.RATE: ("more", "fewer", "requests/s"),
    LoadKnob.CONCURRENCY: ("more", "fewer", "requests in flight"),
}


def slo_words(slo: dict[str, float | None], target: float) -> str:
    """``99% of requests within TTFT <= 500 ms and TPOT <= 50 ms``."""
    names = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "e2e_ms": "end-to-end latency"}
    targets = " and ".join(f"{names[key]} <= {value:g} ms" for key, value in slo.items() if value is not None)
    return f"{100 * target:g}% of requests within {targets}"


def _shares(low: float | None, high: float | None) -> str:
    """A 95% interval of shares (fractions), an open side said as such: ``[2.3%, 9.8%]``, ``(at least 40.0%)``."""
    if low is None and high is None:
        return "(95% CI open on both sides)"
    if low is None:
        return f"(95% CI: at most {100 * high:.1f}%)"  # type: ignore[operator]
    if high is None:
        return f"(95% CI: at least {100 * low:.1f}%)"
    return f"[{100 * low:.1f}%, {100 * high:.1f}%]"


def capacity_sentence(
    estimate: CapacityEstimateRecord | None, knob: LoadKnob, slo: dict[str, float | None], target: float
) -> str:
    """What the estimate says, in words that match it: more or less load within a bounded interval or a one-sided
    bound, not shown to differ, not bracketed, or nothing yet."""
    at = slo_words(slo, target)
    if estimate is None:
        return f"no capacity estimate: no load level was measured ({at})"
    a, b = estimate["capacity_a"], estimate["capacity_b"]
    if a["bound"] != "exact" or b["bound"] != "exact":
        where = {"at_least": "meets it at every load probed", "below": "misses it at the lowest load probed"}
        arms = (("the reference", a), ("the configuration", b))
        censored = "; ".join(f"{arm} {where[c['bound']]}" for arm, c in arms if c["bound"] != "exact")
        return f"capacity not bracketed at {at}: {censored} (widen min_load/max_load or raise the budget)"
    ratio, low, high = estimate["ratio"], estimate["ci_low"], estimate["ci_high"]
    assert ratio is not None, "two bracketed crossings give a ratio"
    loads = f"({a['load']:.4g} -> {b['load']:.4g} {knob.unit})"
    if not estimate["flagged"]:
        gain = _shares(None if low is None else low - 1, None if high is None else high - 1)
        return (
            f"the configuration is not shown to serve a different load than the reference at {at}: "
            f"{100 * (ratio - 1):+.1f}% {gain} {loads}"
        )
    more = ratio > 1
    share = ratio - 1 if more else 1 - ratio
    near = low if more else high  # flagged: the interval excludes 1, so its side nearer 1 is bounded
    assert near is not None
    bounds = (near - 1, None if high is None else high - 1) if more else (1 - near, None if low is None else 1 - low)
    up, down, what = _WHAT[knob]
    return (
        f"the configuration serves {100 * share:.1f}% {_shares(*bounds)} {up if more else down} {what} "
        f"than the reference at {at} {loads}"
    )
