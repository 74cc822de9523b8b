"""io/fs.py's pure parts: which file a failed Spark read names, how a path is written as a URI (no server needed)."""

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


def test_a_listed_path_is_written_as_hadoop_writes_its_uri():
    """``uri_string`` gives the form of Spark's ``_metadata.file_path`` (Hadoop's
    ``Path.toUri().toString()``), which ``binary_files`` filters the listing by: the expected
    strings are what Hadoop 3.5's Path printed for these names (a space, %, brackets, # and ? in a
    name, a tab, a no-break space, non-ASCII letters and an emoji, the characters kept as they are)."""
    from l4spark.io.fs import uri_string

    root = "hdfs://127.0.0.1:9000/logs/"
    assert uri_string(root + "job a/ünï 50%/a[1]#x?y") == root + "job%20a/ünï%2050%25/a%5B1%5D%23x%3Fy"
    assert uri_string(root + "tab\tx") == root + "tab%09x"
    assert uri_string(root + "nbsp\u00a0x") == root + "nbsp%C2%A0x"
    assert uri_string(root + "é😀.log.gz") == root + "é😀.log.gz"
    assert uri_string(root + "a;b,c$d@e!~*'()+&=") == root + "a;b,c$d@e!~*'()+&="
    assert uri_string("s3a://bucket/logs/job a/rank-0.log") == "s3a://bucket/logs/job%20a/rank-0.log"


def test_over_spark_connect_nothing_is_deleted_and_the_log_says_so():
    """``delete_paths`` needs classic Spark's gateway: with a Spark Connect session (a real client,
    in its own process as a Connect session must be; no server is reached, since nothing is sent)
    it deletes nothing, returns False and logs what stays."""
    import os
    import subprocess
    import sys

    script = ("import logging; logging.basicConfig(level=logging.INFO, format='%(message)s')\n"
              "from pyspark.sql.connect.session import SparkSession\n"
              "from l4spark.io import fs\n"
              "session = SparkSession.builder.remote('sc://127.0.0.1:9').create()\n"
              "print(fs.delete_paths(session, ['hdfs://127.0.0.1:9/wh/_template_store/state-000001'],"
              " 'superseded versions of state'), flush=True)\n"
              # the client's exit hook would try to release the session on the absent server
              "import logging, os; logging.shutdown(); os._exit(0)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False"
    assert "Spark Connect: 1 superseded versions of state stay on storage" in done.stderr
