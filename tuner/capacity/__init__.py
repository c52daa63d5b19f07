"""The ``tuner capacity`` wing: the largest load each arm serves within the SLO, and their ratio with a CI."""

from tuner.capacity.forecast import Forecast
from tuner.capacity.planner import KneePlanner, Probe
from tuner.capacity.run import capacity_on, run_capacity
from tuner.capacity.winner import configuration_from

__all__ = ["Forecast", "KneePlanner", "Probe", "capacity_on", "configuration_from", "run_capacity"]
