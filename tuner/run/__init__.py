"""The ``tuner run`` wing: benchmark one configuration on a live engine."""

from tuner.run.run import run_experiment

__all__ = ["run_experiment"]
