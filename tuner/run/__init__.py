"""The ``tuner run`` wing: benchmark one configuration on a live engine."""
