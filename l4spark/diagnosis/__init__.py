"""Diagnosis (L4 step 5 and the assembly): the steps' evidence as one ranked answer per job.

In: ``events``, ``jobs``, ``normal_pool``, ``fault_patterns`` and the spatial and temporal steps.
Out: ``diagnosis_jobs`` (written last), ``diagnosis_events``, ``diagnosis_nodes``, ``diagnosis_iterations``,
``diagnosis_pace``.
"""
