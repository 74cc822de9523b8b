"""The cross-job filter's vocabulary: why a failed job's line was kept or removed (no Spark here)."""

# Why a failed job's line is kept (``reason``); removed lines have reason ``normal``.
NO_HISTORY = "no_history"
NO_EVENT_ID = "no_event_id"
NOT_IN_POOL = "not_in_pool"
# absent from the job's group, normal in another group's healthy jobs (NormalPoolConfig.known_elsewhere)
NOT_IN_GROUP = "not_in_group"
RARE_IN_POOL = "rare_in_pool"
RATE_ABOVE_NORMAL = "rate_above_normal"
NEW_VARIANT = "new_variant"
NORMAL = "normal"
BOILERPLATE = "boilerplate"  # removed: stack frames, teardown and advice lines (the caller's per-line flag)
KEEP_REASONS = (NOT_IN_POOL, NOT_IN_GROUP, RARE_IN_POOL, RATE_ABOVE_NORMAL, NEW_VARIANT, NO_HISTORY, NO_EVENT_ID)
# the keep reasons of a job with history: what the pool said about an event it compared
EVIDENCE_REASONS = (NOT_IN_POOL, NOT_IN_GROUP, RARE_IN_POOL, RATE_ABOVE_NORMAL, NEW_VARIANT)
