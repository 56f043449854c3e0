"""Benchmark building blocks (round timing side by side with a baseline).

Not part of the installed package: a top-level package of the checkout,
beside scripts/, whose `benchmark*.py` put the checkout's root on the path.
"""
