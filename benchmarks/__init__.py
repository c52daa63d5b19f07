"""Scripts that make the figures the README and the docs quote, grouped by job (README.md here)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
"""The repository: experiments/, results/ and tests/ are found from here."""
