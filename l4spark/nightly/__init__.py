"""The nightly batch: which jobs to parse and diagnose, and the steps run in order over them.

In: the logs root listed once, and the warehouse's ``jobs`` and ``diagnosis_jobs`` tables.
Out: every table the steps write, the reports, and a ``runs`` row per run.
"""
