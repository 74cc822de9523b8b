"""Cross-job filter (L4 step 2): drop events that healthy jobs of the same settings also print.

In: ``jobs``, ``job_event_forms`` / ``events`` of successful jobs; a failed job's lines.
Out: ``normal_pool``, ``normal_pool_variants``, ``normal_pool_ledger``; the failed job's candidate lines.
"""
