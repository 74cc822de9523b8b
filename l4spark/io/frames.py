"""Frames made on the driver or kept for reuse: ``local_frame`` (driver rows that may be large),
``materialize`` (a small table computed once, its lineage cut), ``computed_once`` (a large frame
that several actions read).

Apart from ``io.session`` (which starts Spark and imports the settings) so that ``io.fs``, a
module the settings themselves import, can build its file table with ``local_frame`` without an
import cycle (config -> io.fs -> io.session -> config). Nothing here imports pyspark before it
is called with a session.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def materialize(frame: DataFrame) -> DataFrame:
    """``frame`` computed once and its lineage cut (``localCheckpoint``), for the small tables a
    step reuses (filter decisions, node rankings, iteration rows).

    Over Spark Connect, the PySpark client copies the plan into its checkpoint command with
    Python protobuf, which refuses a plan nested more than 100 levels deep (``DecodeError:
    Exceeded upb_DecodeOptions_MaxDepth``) before the server sees it; the diagnosis' per-line
    steps build such plans. Such a frame is collected and sent back as a local relation instead,
    which is why this is only for small tables. Classic Spark never takes that path.
    """
    from google.protobuf.message import DecodeError

    try:
        return frame.localCheckpoint()
    except DecodeError:
        return frame.sparkSession.createDataFrame(frame.toPandas(), schema=frame.schema)


def computed_once(frame: DataFrame) -> DataFrame:
    """``frame`` computed now and kept on the executors (memory, then disk), for a large frame
    that several later actions read (the diagnosis' per-line frame). Classic Spark cuts its
    lineage too (``localCheckpoint``): every later query plans from the stored rows, not from the
    deep plan that made them (each analysis of that plan cost about a second). Over Spark Connect
    a plan nested more than 100 levels cannot be checkpointed (``materialize``); the frame is
    persisted instead (computed at its first action, never collected): call ``unpersist`` when done.
    A local checkpoint lives on the executors that computed it: an executor lost before the
    last read (preemption, dynamic allocation giving it back) fails that read instead of
    recomputing it, and the nightly then diagnoses the batch's jobs one by one (``diagnose_jobs``).
    """
    from google.protobuf.message import DecodeError

    try:
        return frame.localCheckpoint()
    except DecodeError:
        return frame.persist()


# Driver-side rows become a LocalRelation, which Spark parallelizes into at most
# ``spark.sql.leafNodeDefaultParallelism`` (default: ``spark.default.parallelism``) slices carried
# inside the tasks; and a stage that also runs Python (mapInArrow, pandas UDFs) serializes the whole
# relation into every one of its tasks. Above this size the rows are checkpointed once, in tasks
# that each carry at most about this many bytes.
LOCAL_CHUNK_BYTES = 256 * 1024
LEAF_PARALLELISM = "spark.sql.leafNodeDefaultParallelism"


def local_frame(spark: SparkSession, rows, schema=None, chunk_bytes: int = LOCAL_CHUNK_BYTES) -> DataFrame:
    """``spark.createDataFrame(rows, schema)`` for driver-side rows (a pandas DataFrame, a
    pyarrow Table or a list of tuples) that may be large: one local relation, checkpointed
    (``materialize``) by a job whose tasks each carry a slice of about ``chunk_bytes``
    (``spark.sql.leafNodeDefaultParallelism`` for that job), so that later stages read the rows
    from the block manager instead of carrying them in their tasks ("task of very large size").
    Small rows (one slice) are a plain local relation.

    One ``createDataFrame`` call, not one per slice: each call costs a round trip to the JVM and
    each union of the slices another analysis of the growing plan (about 7 s for the 78 slices
    of a 50,000-shape table). A list of tuples becomes a pandas frame first, since classic
    Spark makes a list an RDD of ``spark.default.parallelism`` slices, not a local relation."""
    import pandas as pd
    import pyarrow as pa

    if isinstance(rows, pa.Table):
        size, n_rows = rows.nbytes, rows.num_rows
    elif isinstance(rows, pd.DataFrame):
        size, n_rows = int(rows.memory_usage(index=False, deep=True).sum()), len(rows)
    else:
        rows = list(rows)
        size, n_rows = sum(len(repr(r)) for r in rows), len(rows)
    slices = min(max(1, -(-size // chunk_bytes)), max(n_rows, 1))
    if slices == 1:
        return spark.createDataFrame(rows, schema) if schema is not None else spark.createDataFrame(rows)
    if isinstance(rows, list):
        names = spark.createDataFrame([], schema).columns if schema is not None else None
        rows = pd.DataFrame.from_records(rows, columns=names)
    frame = spark.createDataFrame(rows, schema) if schema is not None else spark.createDataFrame(rows)
    with session_settings(spark, {LEAF_PARALLELISM: str(slices)}):
        return materialize(frame)


@contextmanager
def session_settings(spark: SparkSession, settings: dict[str, str]) -> Iterator[None]:
    """``settings`` (Spark SQL keys and values) in the session for the block, then each back as it
    was (unset if it was unset). Session settings, so they work over Spark Connect too. The
    session's settings are shared by its threads: set them around writes that run
    in threads (``in_parallel``), not from the threads."""
    before = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)
