"""The tool's own decision code driven on simulated hosts and servers, no engine (README.md here)."""
