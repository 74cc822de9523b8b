"""Benchmarks (``make bench``, ``make bench-nightly``): ratios measured in one run, never gating CI.

In: generated fleets. Out: printed throughput and phase tables, JSON with ``--out``.
"""
