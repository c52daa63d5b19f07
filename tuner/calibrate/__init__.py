"""The ``tuner calibrate`` wing: what a comparison costs on this host, and whether it measures what it claims."""

from tuner.calibrate.run import run_calibration

__all__ = ["run_calibration"]
