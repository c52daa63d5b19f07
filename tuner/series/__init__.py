"""CI benchmark series: ``tuner export bench``, ``history``, ``pr-check`` and ``dashboard``."""
