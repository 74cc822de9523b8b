"""io/fs.py's pure parts: which file a failed Spark read names (no server needed)."""

from __future__ import annotations

from l4spark.io.fs import refused_path

PATHS = ["hdfs://127.0.0.1:9000/logs/job a/n/rank-0.log", "hdfs://127.0.0.1:9000/logs/job a/n/rank-1.log"]
FAILED = ("Job aborted: org.apache.spark.SparkException: [FAILED_READ_FILE.NO_HINT] Encountered error while "
          "reading file hdfs://127.0.0.1:9000/logs/job%20a/n/rank-1.log.  SQLSTATE: KD001\n"
          "Caused by: org.apache.hadoop.hdfs.{cause}: Could not obtain block")


def test_a_read_failed_by_hdfs_names_its_listed_file():
    assert refused_path(RuntimeError(FAILED.format(cause="BlockMissingException")), PATHS) == PATHS[1]
    assert refused_path(RuntimeError(FAILED.format(cause="AccessControlException")), PATHS) == PATHS[1]


def test_other_read_failures_are_not_taken_for_a_refused_file():
    # another cause (Spark skips those itself: this one is a bug to raise), a file not listed, no path
    assert refused_path(RuntimeError(FAILED.format(cause="SomethingElse")), PATHS) is None
    assert refused_path(RuntimeError(FAILED.format(cause="BlockMissingException")), PATHS[:1]) is None
    assert refused_path(RuntimeError("BlockMissingException: Could not obtain block"), PATHS) is None
