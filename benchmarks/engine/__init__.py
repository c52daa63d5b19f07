"""Experiments on the real engine at hand and on this host's commands (README.md here)."""
