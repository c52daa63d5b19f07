"""``tuner versions``: one experiment on two vLLM installs, compared by engine starts in mirrored order.

``installs`` (finding and starting an install), ``compare`` (the start-level estimate and the bisection) and ``run``
(the command).
"""
