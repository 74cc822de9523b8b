"""Settings of the cross-job filter and the normal pool: the conf's ``[normal_pool]`` table, typed
(no Spark here). ``l4spark.config.load_config`` builds it, refusing bad keys by name.
"""

from __future__ import annotations

from dataclasses import dataclass

from l4spark.crossjob.fingerprint import DEFAULT_LEVELS, GroupingLevel
from l4spark.errors import ConfigError


@dataclass(frozen=True)
class NormalPoolConfig:
    """How jobs are grouped and what "frequently present" means.

    levels: grouping levels, exact first; a failed job is compared with the first level whose
        group has at least ``min_group_jobs`` successful jobs, else it has no history.
    succeeded_statuses: ``jobs.status`` values of jobs whose events are normal.
    min_support: an event is normal when present in at least this share of the group's jobs.
    rate_keep: keep a normal event whose rate in the failed job (lines per node) is more than
        ``rate_factor`` times the highest rate seen in a healthy job of the group, with at least
        ``rate_min_lines`` lines (a retry message seen 3 times per healthy job, 30,000 times here).
    variant_keep: keep the lines of a normal event whose masked message no healthy job of the
        group wrote, when the event's forms are stable in healthy jobs: its leave-one-out
        ``variant_novelty`` is at most ``variant_max_novelty`` (a test that would fire on the
        group's own healthy jobs says nothing about a failed one).
    known_elsewhere: an event absent from the job's group that healthy jobs of another group write
        (support >= ``min_support`` in a group of >= ``min_group_jobs`` jobs) is kept with reason
        ``not_in_group`` instead of ``not_in_pool``: the group has not seen it, but the fleet
        knows it as healthy output of another setting (NCCL_DEBUG=INFO's start-up lines in a job
        whose group logs quietly). The diagnosis does not count it as cross-job evidence.
    remove_boilerplate: remove the lines of a masked message when at least ``boilerplate_share``
        of them carry the caller's per-line ``boilerplate`` flag (diagnosis sets it on stack
        frames, the source lines under Python frames, lines without a letter, and the
        teardown/advice lines of ``diagnosis.consequence_patterns``): failure-path text that no
        successful job writes, so the pool cannot remove it. Independent of history: a job
        without history loses these too (reported apart from the pool's removals).
    """

    levels: tuple[GroupingLevel, ...] = DEFAULT_LEVELS
    succeeded_statuses: tuple[str, ...] = ("succeeded",)
    min_group_jobs: int = 2
    min_support: float = 0.5
    rate_keep: bool = True
    rate_factor: float = 10.0
    rate_min_lines: int = 20
    variant_keep: bool = True
    variant_max_novelty: float = 0.2
    known_elsewhere: bool = True
    remove_boilerplate: bool = True
    boilerplate_share: float = 0.5

    def __post_init__(self) -> None:
        if not self.levels:
            raise ConfigError("normal_pool.levels: at least one grouping level is needed")
        names = [level.name for level in self.levels]
        if len(set(names)) != len(names):
            raise ConfigError(f"normal_pool.levels: level names must be unique, found {names}")
        if not 0.0 < self.min_support <= 1.0:
            raise ConfigError(f"normal_pool.min_support must be in (0, 1], found {self.min_support}")
        if self.min_group_jobs < 1:
            raise ConfigError(f"normal_pool.min_group_jobs must be >= 1, found {self.min_group_jobs}")
        if self.rate_factor <= 1.0:
            raise ConfigError(f"normal_pool.rate_factor must be > 1, found {self.rate_factor}")
        if not 0.0 <= self.variant_max_novelty <= 1.0:
            raise ConfigError(f"normal_pool.variant_max_novelty must be in [0, 1], found {self.variant_max_novelty}")
        if not 0.0 < self.boilerplate_share <= 1.0:
            raise ConfigError(f"normal_pool.boilerplate_share must be in (0, 1], found {self.boilerplate_share}")
        if not self.succeeded_statuses:
            raise ConfigError("normal_pool.succeeded_statuses: at least one status is needed")

    def grouping_signature(self) -> dict:
        """What the pool's contents depend on (the filter thresholds do not)."""
        return {"levels": [[level.name, list(level.keys)] for level in self.levels],
                "succeeded_statuses": list(self.succeeded_statuses)}
