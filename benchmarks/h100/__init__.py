"""Research on the H100 per-step recordings: the engine time a verdict costs there (README.md here)."""
