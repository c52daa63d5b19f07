"""When a load's remaining rounds are not run: both arms miss every SLO tier there so clearly that the rounds left
could not change it.

A bracketing probe asks for several rounds at a load, and the search reads from them whether each arm meets each
tier there (its pooled share of every check at least the tier's). Once, for both arms and every tier, some check's
share is so low that the rounds left could not lift its pooled share to the tier's even if every request in them
passed, the load is a miss for both arms whatever those rounds show: the knees lie below it, and the grid that
follows measures the loads around them. Past a knee, as GuideLLM stops a probe once the server is over-saturated,
the rest of such a probe is not run. A rule on the arms falling behind the offered rate was tried first and
dropped: replaying an 80-request trace window fast, a run's last requests alone outlast the span of the sends, so
runs that kept up looked behind.
"""

from __future__ import annotations

from collections.abc import Sequence

from tuner.capacity.slo import CapacitySlo
from tuner.records import ARMS


def oversaturated(slo: CapacitySlo, met: dict[str, list[list[list[bool]]]], rounds: int) -> bool:
    """Whether, after the rounds so far (``met``: per arm, round, check, request) of the ``rounds`` asked for, both
    arms miss every tier of ``slo`` whatever the rounds left show (module docstring)."""
    return all(_missed(shares, met[arm], rounds) for arm in ARMS for shares in slo.tiers.values())


def _missed(shares: Sequence[tuple[int, float]], done: list[list[list[bool]]], rounds: int) -> bool:
    """Whether some check of a tier stays below its share even if every request of the rounds left passes it (a
    round of the rest holds as many requests as the rounds so far, on average)."""
    for check, least in shares:
        flags = [flag for each in done for flag in each[check]]
        left = len(flags) / len(done) * (rounds - len(done))
        if sum(flags) + left < least * (len(flags) + left):
            return True
    return False
