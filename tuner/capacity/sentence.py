"""The sentence a capacity search ends with: how much more load the configuration serves within the SLO."""

from __future__ import annotations

from tuner.config import LoadKnob
from tuner.records import TierRecord
from tuner.stats import CapacityEstimateRecord

_WHAT = {
    LoadKnob.SPEED: ("more", "less", "traffic (replay speed)"),
    LoadKnob.RATE: ("more", "fewer", "requests/s"),
    LoadKnob.CONCURRENCY: ("more", "fewer", "requests in flight"),
}


def _shares(low: float | None, high: float | None) -> str:
    """A 95% interval of shares (fractions), an open side said as such: ``[2.3%, 9.8%]``, ``(at least 40.0%)``."""
    if low is None and high is None:
        return "(95% CI open on both sides)"
    if low is None:
        return f"(95% CI: at most {100 * high:.1f}%)"  # type: ignore[operator]
    if high is None:
        return f"(95% CI: at least {100 * low:.1f}%)"
    return f"[{100 * low:.1f}%, {100 * high:.1f}%]"


WIDEN = "widen min_load/max_load or raise the budget"
"""What a search that did not bracket a knee is told to change, unless the load knob itself ran out."""


def tiers_sentence(tiers: list[TierRecord], knob: LoadKnob, advice: str | None = WIDEN) -> str:
    """The sentence of each tier (:func:`capacity_sentence`), led by the tier's name where there are several."""
    if len(tiers) == 1:
        return capacity_sentence(tiers[0]["estimate"], knob, tiers[0]["words"], advice)
    return "; ".join(f"tier {t['name']}: {capacity_sentence(t['estimate'], knob, t['words'], advice)}" for t in tiers)


def capacity_sentence(
    estimate: CapacityEstimateRecord | None, knob: LoadKnob, at: str, advice: str | None = WIDEN
) -> str:
    """What the estimate says at the SLO ``at`` (in words: :meth:`tuner.capacity.slo.CapacitySlo.words`), in words
    that match it: more or less load within a bounded interval or a one-sided bound, not shown to differ, not
    bracketed (with ``advice`` on what to change, where there is one), or nothing yet."""
    if estimate is None:
        return f"no capacity estimate: no load level was measured by both arms ({at})"
    a, b = estimate["capacity_a"], estimate["capacity_b"]
    if a["bound"] != "exact" or b["bound"] != "exact":
        where = {"at_least": "meets it at every load probed", "below": "misses it at the lowest load probed"}
        arms = (("the reference", a), ("the configuration", b))
        censored = "; ".join(f"{arm} {where[c['bound']]}" for arm, c in arms if c["bound"] != "exact")
        return f"capacity not bracketed at {at}: {censored}" + (f" ({advice})" if advice else "")
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
