"""Spatial comparison (L4 step 3): which nodes (or ranks) of a failed job deviate, and through which events.

In: a failed job's candidate lines (``events`` rows kept by the cross-job filter).
Out: ``diagnosis_nodes`` (score, rank, suspect, silent, evidence) and the spatially deviating events.
"""
