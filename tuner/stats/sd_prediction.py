"""Where the next comparison's per-pair SD will fall, given the one measured now: a prediction interval that allows
for heavy tails and for the drift between calibrations.

A plan rests on a per-pair SD measured from ``n`` pairs (a calibration's A/A, a screening) and is spent on other
pairs, later. A chi-square bound assumes normal pairs and the same SD then: on the H100 A/A recordings it covered
the next window's SD only 70-75% of the time, and on this CPU the calibration's SD was 0.040 and the next
screening's 0.078. Two things widen it (``python -m benchmarks.engine.sd_prediction`` measures both and the coverage):

- **heavy tails**: the log of a sample SD has standard error ``0.5 * sqrt((kurtosis + 2) / n)`` (excess kurtosis;
  0 for normal pairs, where it is the chi-square's). A sample's kurtosis runs low where the tails are heavy, so the
  larger of the measured one and :data:`KURTOSIS_FLOOR` is used;
- **drift**: the host's noise moves between calibrations and between a calibration and a sweep (:data:`DRIFT`, an
  SD of log SD).

The SD measured now and the one met next each have the sampling error, and the drift comes between them:
``log s_next - log s ~ N(0, se(n)^2 + se(n_next)^2 + DRIFT^2)``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as _st

KURTOSIS_FLOOR = 20.0
"""The least excess kurtosis of per-pair values a prediction assumes: step pairs have heavy tails (rare slow steps),
and a sample of a few hundred pairs underestimates them (``benchmarks.engine.sd_prediction``)."""
DRIFT = 0.35
"""SD of the log per-pair SD between a calibration and the comparisons planned on it: 0.37 over this CPU's
committed quickstarts (calibration against screening, one in a noisy spell), 0.05 between the H100's A/A runs
(``benchmarks.engine.sd_prediction``); a host whose noise is steadier gets a range wider than it needs."""
CONFIDENCE = 0.95
"""The one-sided level of the upper bound a plan is also stated at (two-sided 90% for the printed range)."""


def excess_kurtosis(values: Sequence[float] | np.ndarray) -> float | None:
    """The sample excess kurtosis of per-pair values (None below 4 values or with no spread)."""
    x = np.asarray(values, dtype=np.float64)
    if x.size < 4 or not np.ptp(x) > 0:
        return None
    return float(_st.kurtosis(x, fisher=True, bias=False))


def log_sd_error(pairs: int, kurtosis: float | None = None) -> float:
    """The standard error of the log of a per-pair SD measured from ``pairs`` pairs (inf below 2)."""
    if pairs < 2:
        return math.inf
    k = max(KURTOSIS_FLOOR, kurtosis if kurtosis is not None and math.isfinite(kurtosis) else KURTOSIS_FLOOR)
    return 0.5 * math.sqrt((k + 2) / pairs)


@dataclass(frozen=True)
class SdPrediction:
    """The per-pair SD the next comparison is expected to meet: ``low`` and ``high`` bound it two-sided at
    ``2 * CONFIDENCE - 1`` (``high`` is the one-sided ``CONFIDENCE`` bound plans are also stated at)."""

    log_sd: float
    low: float
    high: float

    def words(self) -> str:
        return f"{self.log_sd:.3f} ({self.low:.3f}-{self.high:.3f} expected next)"


def predict_sd(
    log_sd: float,
    pairs: int,
    *,
    next_pairs: int | None = None,
    kurtosis: float | None = None,
    drift: float = DRIFT,
    confidence: float = CONFIDENCE,
) -> SdPrediction:
    """The range of the per-pair SD a comparison of ``next_pairs`` (default: as many) pairs will measure, from
    ``log_sd`` measured on ``pairs`` pairs of that ``kurtosis`` (module docstring). Unbounded below 2 pairs."""
    if pairs < 2 or not math.isfinite(log_sd):
        return SdPrediction(log_sd, 0.0, math.inf)
    spread = math.hypot(log_sd_error(pairs, kurtosis), log_sd_error(next_pairs or pairs, kurtosis), drift)
    z = float(_st.norm.ppf(confidence))
    return SdPrediction(log_sd, log_sd * math.exp(-z * spread), log_sd * math.exp(z * spread))


def drift_factors(
    pairs: int, *, kurtosis: float | None = None, drift: float = DRIFT, nodes: int = 9
) -> tuple[tuple[float, float], ...]:
    """Factors the true per-pair SD may stand at against one measured from ``pairs`` pairs, with their weights
    (Gauss-Hermite over the log: that SD's sampling error and the host's drift, not the next comparison's own
    sampling error): a power averaged over them is what a plan on that SD delivers on average."""
    spread = math.hypot(log_sd_error(pairs, kurtosis), drift) if pairs >= 2 else drift
    x, w = np.polynomial.hermite_e.hermegauss(nodes)
    norm = math.sqrt(2 * math.pi)
    return tuple((math.exp(spread * float(xi)), float(wi) / norm) for xi, wi in zip(x, w, strict=True))
