"""The test suite's plumbing inside the engine processes it starts (not a test subject): ``fast_exit``."""
