"""The body of the steps and its tail guard: a step comparison whose noise is not its rare pauses'.

On an H100's step recordings the 4-7% of pairs holding a step over twice the median carry 72-88% of the sign-flip
variance of the plain ratio of sums (``../shared/notes/statistics-review-3.md``). So each step is split at a cap,
a multiple of the running median of the steps before it (both arms pooled, in time order, so that one arm's
effect barely moves its own cap): the **body** (each step's time up to its cap) and the **excess** (what lies
above it). Two contrasts then make one decision:

- the body's ratio of sums, the exact sign-flip test and its inverted CI (:func:`tuner.stats.paired_ratio_of_sums`),
  the "typical step" effect;
- the **tail guard**: the arms' excess as a share of their time, ``s_B - s_A``, with a one-sided non-inferiority
  bound at ``margin`` (a t interval of its delta-method influence values: an approximation, unlike the body's exact
  test, that the excess's heavy tail makes conservative only with enough pairs).

The trial is called better only when its body is faster and its pauses are shown not worse by ``margin`` (an
intersection-union test: each part at the same one-sided level, no alpha split); worse when its body is slower or
its pauses are shown worse by more than ``margin``. An effect that lives only in the pauses (a GC strategy's can)
is not the body's to find: the plain mean, or the stall estimand, measures it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.stats import t as student_t

from tuner.stats.estimate import RatioEstimate
from tuner.stats.ratio_of_sums import paired_ratio_of_sums

CAP_MULTIPLE = 2.0
"""A step's cap: this multiple of the running median (the review's design; 1.5x gains more, and cuts into steps an
arm's effect may move)."""
CAP_WINDOW = 64
"""The running median's window: the steps just before (both arms)."""
LEAST_HISTORY = 16
"""Steps the first caps are taken from: before this many came, the median of the first ones (a few not yet past)."""
GUARD_MARGIN = 0.005
"""The tail guard's default non-inferiority margin: the trial's pauses may add at most 0.5% of its step time."""

Floats = npt.NDArray[np.float64]


def running_caps(
    seconds: npt.ArrayLike, *, multiple: float = CAP_MULTIPLE, window: int = CAP_WINDOW, least: int = LEAST_HISTORY
) -> Floats:
    """Each step's cap, steps in time order: ``multiple`` x the median of the ``window`` steps before it (the first
    ``least`` steps' median until that many came)."""
    t = np.asarray(seconds, dtype=np.float64)
    caps = np.empty(t.size)
    head = min(least, t.size)
    for i in range(min(window, t.size)):
        caps[i] = np.median(t[max(0, i - window) : max(i, head)])
    if t.size > window:
        caps[window:] = np.median(np.lib.stride_tricks.sliding_window_view(t[:-1], window), axis=1)
    return np.asarray(multiple * caps, dtype=np.float64)


def split_at_caps(seconds: npt.ArrayLike, caps: npt.ArrayLike) -> tuple[Floats, Floats]:
    """Each step's body (up to its cap) and excess (above it)."""
    t = np.asarray(seconds, dtype=np.float64)
    body = np.minimum(t, np.asarray(caps, dtype=np.float64))
    return body, t - body


@dataclass(frozen=True)
class TailGuard:
    """The arms' excess shares of their time and the bound on their difference (trial minus reference)."""

    reference_share: float
    trial_share: float
    low: float  # two-sided bounds at the body's confidence: each side one-sided at half its error
    high: float
    margin: float

    @property
    def difference(self) -> float:
        return self.trial_share - self.reference_share

    @property
    def holds(self) -> bool:
        """Whether the trial's pauses are shown not worse by more than ``margin``."""
        return self.high < self.margin

    @property
    def breached(self) -> bool:
        """Whether the trial's pauses are shown worse by more than ``margin``."""
        return self.low > self.margin

    def to_dict(self) -> dict[str, Any]:
        return {
            "reference_share": self.reference_share,
            "trial_share": self.trial_share,
            "difference": self.difference,
            "ci_low": self.low,
            "ci_high": self.high,
            "margin": self.margin,
            "holds": self.holds,
        }


def tail_guard(
    trial_excess: npt.ArrayLike,
    trial_time: npt.ArrayLike,
    reference_excess: npt.ArrayLike,
    reference_time: npt.ArrayLike,
    *,
    margin: float = GUARD_MARGIN,
    confidence: float = 0.95,
) -> TailGuard:
    """``s_B - s_A`` (each arm's summed excess over its summed time) from per-pair sums, with a t interval of the
    pairs' influence values."""
    eb, tb, ea, ta = (
        np.asarray(x, dtype=np.float64) for x in (trial_excess, trial_time, reference_excess, reference_time)
    )
    sb, sa = eb.sum() / tb.sum(), ea.sum() / ta.sum()
    influence = (eb - sb * tb) / tb.sum() - (ea - sa * ta) / ta.sum()
    n = influence.size
    se = math.sqrt(float(np.sum(influence**2)) * n / (n - 1)) if n > 1 else math.inf
    half = float(student_t.ppf(0.5 + confidence / 2, n - 1)) * se if n > 1 else math.inf
    return TailGuard(float(sa), float(sb), float(sb - sa) - half, float(sb - sa) + half, margin)


@dataclass(frozen=True)
class BodyComparison:
    """The body's step-time ratio (trial over reference: lower is faster) and the tail guard, one decision."""

    body: RatioEstimate
    guard: TailGuard

    @property
    def verdict(self) -> str:
        """``better`` (body faster, pauses not worse by the margin), ``worse`` (body slower or pauses worse by more
        than the margin), else ``not_significant``."""
        if self.body.verdict == "worse" or self.guard.breached:
            return "worse"
        if self.body.verdict == "better" and self.guard.holds:
            return "better"
        return "not_significant"

    def line(self) -> str:
        """The claim in words: the typical step's change and what the pauses did."""
        b, g = self.body, self.guard
        return (
            f"typical steps {b.ratio:.4f} [{b.ci_low:.4f}, {b.ci_high:.4f}] of the reference's time; pauses "
            f"{g.difference:+.2%} of step time [{g.low:+.2%}, {g.high:+.2%}] "
            + ("(not worse by " if g.holds else "(not shown within ")
            + f"{g.margin:.1%})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {"body": self.body.to_dict(), "guard": self.guard.to_dict(), "verdict": self.verdict}


def body_comparison(
    amount: npt.ArrayLike,
    trial: tuple[npt.ArrayLike, npt.ArrayLike],
    reference: tuple[npt.ArrayLike, npt.ArrayLike],
    *,
    margin: float = GUARD_MARGIN,
    confidence: float = 0.95,
    n_permutations: int = 10_000,
    seed: int = 0,
) -> BodyComparison:
    """The body and its guard from per-pair sums: ``amount`` steps per block (both arms alike), each arm's
    ``(body seconds, excess seconds)``."""
    trial_body, trial_excess = (np.asarray(x, dtype=np.float64) for x in trial)
    reference_body, reference_excess = (np.asarray(x, dtype=np.float64) for x in reference)
    body = paired_ratio_of_sums(
        amount, trial_body, amount, reference_body,
        higher_is_better=False, confidence=confidence, n_permutations=n_permutations, seed=seed,
    )  # fmt: skip
    guard = tail_guard(
        trial_excess, trial_body + trial_excess, reference_excess, reference_body + reference_excess,
        margin=margin, confidence=confidence,
    )  # fmt: skip
    return BodyComparison(body, guard)
