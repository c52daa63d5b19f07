"""Paired measurement on a live engine: repetitions, step-interleaved blocks, their grain, pairs and stalls."""
