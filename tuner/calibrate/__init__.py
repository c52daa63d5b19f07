"""The ``tuner calibrate`` wing: what a comparison costs on this host, and whether it measures what it claims."""
