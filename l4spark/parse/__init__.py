"""Parse (L4 step 1): rank log files into log events.

In: the logs root (``<job>/<node>/rank-<r>.log[.gz]`` and ``job.json``) and the template store.
Out: ``events``, ``templates``, ``jobs``, ``job_event_counts``, ``job_event_forms``, ``quarantine``.
"""
