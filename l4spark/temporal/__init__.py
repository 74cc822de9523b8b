"""Temporal analysis (L4 step 4): when in the job's life it broke.

In: the candidate lines of failed jobs (``events`` rows after the cross-job filter), in file order.
Out: each line's stage and iteration; per job the failure stage and iteration; DTW-scored
iterations (``diagnosis_iterations``), hangs and slowdowns. See docs/temporal.md.
"""
