"""Benchmark building blocks (round timing side by side with a baseline)."""
