"""Ingest: rank files -> a DataFrame of lines (and of the files' quarantine entries).

Files are listed once on the driver (``layout.scan_logs_root``), packed into read tasks of
about ``ingest.target_task_bytes`` each, and read inside Spark tasks with ``mapInArrow``:
``spark.range(n_tasks)`` gives exactly one task id per partition, and each task reads its
files whole with ``reader.read_lines``. Spark never lists or opens the small files itself,
line numbers are exact (no file is split), and a broken file becomes quarantine rows instead
of a failed stage.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from contextlib import contextmanager
from typing import Iterator, Mapping, Sequence

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from l4spark.config import IngestConfig
from l4spark.io.fs import RootListing, binary_files, is_local, parallelism
from l4spark.io.fs import remote_scan_settings as fs_remote_scan_settings
from l4spark.io.frames import local_frame
from l4spark.parse.layout import Issue, RankFile
from l4spark.parse.reader import ReadLimits, read_lines
from l4spark.parse.textrules import fold_digits

# One row per kept line (issue is null) or per quarantine entry of a file (issue is the
# reason, raw is a sample, n_lines/n_bytes count what it covers).
INGEST_SCHEMA = T.StructType([
    T.StructField("job_id", T.StringType(), False),
    T.StructField("node", T.StringType(), True),
    T.StructField("rank", T.IntegerType(), True),
    T.StructField("file", T.StringType(), True),
    T.StructField("line_no", T.LongType(), True),
    T.StructField("raw", T.StringType(), True),
    T.StructField("shape", T.StringType(), True),
    T.StructField("issue", T.StringType(), True),
    T.StructField("detail", T.StringType(), True),
    T.StructField("n_lines", T.LongType(), True),
    T.StructField("n_bytes", T.LongType(), True),
    T.StructField("shape_id", T.IntegerType(), True),
])
# A remote read's row for each file it got the bytes of (not a quarantine entry: ``with_unread_files``).
FILE_READ = "file_read"
_ARROW_SCHEMA = pa.schema([
    pa.field("job_id", pa.string(), False),
    pa.field("node", pa.string()),
    pa.field("rank", pa.int32()),
    pa.field("file", pa.string()),
    pa.field("line_no", pa.int64()),
    pa.field("raw", pa.string()),
    pa.field("shape", pa.string()),
    pa.field("issue", pa.string()),
    pa.field("detail", pa.string()),
    pa.field("n_lines", pa.int64()),
    pa.field("n_bytes", pa.int64()),
    pa.field("shape_id", pa.int32()),
])


def plan_read_tasks(files: Sequence[RankFile], conf: IngestConfig, min_tasks: int = 1,
                    job_boundaries: bool = True) -> list[list[RankFile]]:
    """Pack files into tasks of about ``target_task_bytes``, in (job, path) order. With
    ``job_boundaries`` a task also ends at a job boundary once it holds an eighth of the target,
    so it holds one job or a few small ones and writes few job partitions (a write partitioned by
    job), with no sort and few open file writers; without, tasks fill up to the target whatever
    the jobs (a read that writes nothing per job, or an unpartitioned table): on a fleet of small
    jobs that is a few tasks instead of one per few jobs, and each task costs a Python worker
    round and, in a write, a file (0.3x small-files bench: 4 tasks instead of 29, the warm
    parse's CPU seconds 26.5 instead of 32.2). The target shrinks so that there are at least
    ``min_tasks`` tasks (all cores busy). A .gz file weighs its size x ``gz_expansion``.
    Deterministic for the same files."""
    if not files:
        return []

    def weight(f: RankFile) -> float:
        return max(f.size, 1) * (conf.gz_expansion if f.compressed else 1.0)

    total = sum(weight(f) for f in files)
    target = min(conf.target_task_bytes, total / max(min_tasks, 1))
    tasks: list[list[RankFile]] = [[]]
    load = 0.0
    for rank_file in sorted(files, key=lambda f: (f.job_id, f.rel_path)):
        new_job = bool(tasks[-1]) and tasks[-1][-1].job_id != rank_file.job_id
        # a task ends when full, or at a job boundary once it holds more than a small share
        if tasks[-1] and (load + weight(rank_file) / 2 > target or (job_boundaries and new_job and load > target / 8)):
            tasks.append([])
            load = 0.0
        tasks[-1].append(rank_file)
        load += weight(rank_file)
    return tasks


def read_rank_files(spark: SparkSession, files: Sequence[RankFile], conf: IngestConfig,
                    raw: bool = True, shape: bool = False, counts_only: bool = False,
                    shape_ids: Mapping[str, Mapping[str, int]] | None = None,
                    job_boundaries: bool = True, kept: "KeptBytes | None" = None) -> DataFrame:
    """Lines of ``files`` with INGEST_SCHEMA columns; quarantine rows have ``issue`` set.

    ``raw``: ship each line's text; ``shape``: ship its digit-folded shape (``fold_digits``,
    done here in C on whole blocks, far cheaper than a JVM pass per line). A column not asked
    for is null (quarantine samples always come in ``raw``). ``counts_only``: instead of lines,
    one row per (job, shape) of each task: ``n_lines`` lines, first at (``file``, ``line_no``);
    the task counts in C, so only distinct shapes cross to the JVM. ``shape_ids``: per job, its
    shapes' numbers; ship each line's ``shape_id`` (null for a shape its job's mapping lacks)
    instead of the shape's text: a dictionary lookup in the task is cheaper than carrying a
    second copy of every line to the JVM and joining on it there. ``job_boundaries``: tasks end at
    job boundaries (``plan_read_tasks``), for a write partitioned by job. ``kept``: remote
    files' bytes kept by ``kept_remote_bytes`` for every read of ``files`` (ignored for local files).

    Each task's files (and its jobs' shape numbers) travel as that task's rows of a small
    broadcast table, not in the function's closure: a closure is serialized into every task, so
    a fleet's whole file list (6 MB for 30,000 files) and shape map went to every reading task
    ("task of very large size") and every Python worker unpickled them again. A task's files
    come in rows of at most about ``TASK_ROW_BYTES`` (``_task_rows``): a task of thousands of
    small files would otherwise be one row of megabytes, itself carried by a task.
    """
    limits = ReadLimits(conf.max_line_bytes, conf.read_chunk_bytes, conf.binary_control_share)
    batch_lines = conf.batch_lines
    if files and not is_local(files[0].path):
        return _read_remote_files(spark, files, limits, batch_lines, raw, shape, counts_only, shape_ids, kept)
    tasks = plan_read_tasks(files, conf, min_tasks=2 * parallelism(spark), job_boundaries=job_boundaries)

    def read_tasks(task_rows: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in task_rows:
            for row in batch.to_pylist():
                task_files = [RankFile(*spec) for spec in json.loads(row["files"])]
                if counts_only:
                    yield from shape_count_batches(task_files, limits)
                else:
                    ids = None if row["shape_ids"] is None else json.loads(row["shape_ids"])
                    yield from arrow_batches(task_files, limits, batch_lines, raw=raw, shape=shape, shape_ids=ids)

    rows = [(task_id, *row) for task_id, task in enumerate(tasks) for row in _task_rows(task, shape_ids)]
    task_table = pa.table({
        "task_id": pa.array([row[0] for row in rows], pa.int64()),
        "files": pa.array([row[1] for row in rows], pa.string()),
        "shape_ids": pa.array([row[2] for row in rows], pa.string()),
    })
    # one partition per task id, each joined to its rows of the (broadcast) task table
    task_ids = spark.range(0, len(tasks), 1, max(len(tasks), 1)).withColumnRenamed("id", "task_id")
    return (task_ids.join(F.broadcast(local_frame(spark, task_table)), on="task_id", how="inner")
            .select("files", "shape_ids")
            .mapInArrow(read_tasks, INGEST_SCHEMA))


TASK_ROW_BYTES = 128 * 1024


def _task_rows(task: Sequence[RankFile], shape_ids: Mapping[str, Mapping[str, int]] | None,
               max_bytes: int = TASK_ROW_BYTES) -> list[tuple[str, str | None]]:
    """One read task's files as rows of (files JSON, shape numbers JSON of those files' jobs or
    None), in the task's order, each of at most about ``max_bytes``, plus one job's shape
    numbers where they alone are larger (they are not split, and a job's files share its row
    until their specs reach ``max_bytes``). A task reads its rows one after the other: a file's
    lines and a job's shape counts do not depend on which row or task brought the file (pass 1
    keeps a shape's first line by (file, line_no) over all rows)."""
    job_sizes = {} if shape_ids is None else {job_id: len(json.dumps(shape_ids.get(job_id, {})))
                                              for job_id in dict.fromkeys(f.job_id for f in task)}
    rows: list[tuple[str, str | None]] = []
    chunk: list[RankFile] = []
    size = spec_size = 0
    for rank_file in task:
        # a file's spec (and its separator in the JSON list), and its job's shape numbers when
        # the row does not hold them yet; one job's numbers are never split, so a row holding
        # only that job ends when its files' specs alone reach the bound
        cost = len(json.dumps(dataclasses.astuple(rank_file))) + 2
        new_job = not chunk or chunk[-1].job_id != rank_file.job_id
        numbers = job_sizes.get(rank_file.job_id, 0) if new_job else 0
        if chunk and (spec_size + cost > max_bytes or (new_job and size + cost + numbers > max_bytes)):
            rows.append(_task_row(chunk, shape_ids))
            chunk, size, spec_size, numbers = [], 0, 0, job_sizes.get(rank_file.job_id, 0)
        size += cost + numbers
        spec_size += cost
        chunk.append(rank_file)
    if chunk:
        rows.append(_task_row(chunk, shape_ids))
    return rows


def _task_row(files: Sequence[RankFile], shape_ids: Mapping[str, Mapping[str, int]] | None) -> tuple[str, str | None]:
    specs = json.dumps([dataclasses.astuple(f) for f in files])
    return specs, None if shape_ids is None else json.dumps(_task_shape_ids(files, shape_ids))


def _task_shape_ids(task: Sequence[RankFile], shape_ids: Mapping[str, Mapping[str, int]]) -> dict[str, int]:
    """The shape numbers of the jobs of one read task (a task holds one job or a few)."""
    merged: dict[str, int] = {}
    for job_id in dict.fromkeys(f.job_id for f in task):
        merged.update(shape_ids.get(job_id, {}))
    return merged


def _read_remote_files(spark: SparkSession, files: Sequence[RankFile], limits: ReadLimits, batch_lines: int,
                       raw: bool, shape: bool, counts_only: bool,
                       shape_ids: Mapping[str, Mapping[str, int]] | None, kept: "KeptBytes | None" = None) -> DataFrame:
    """``read_rank_files`` of files on a remote file system (``io.fs``): Spark's ``binaryFile``
    source reads each file whole (no split, no decompression; Hadoop's file system of the cluster
    opens it), and the same reader turns its bytes into lines inside the task. Spark packs the
    files into tasks (``spark.sql.files.maxPartitionBytes``, and ``remote_scan_settings``, which
    the caller sets around its queries); one file must stay under 2 GB.

    A file the storage refuses to hand over (an S3 object archived to Glacier, a denied key, an
    HDFS block lost, a file deleted since the listing) gives no row (``fs.binary_files``, which
    lists the files' job folders once and keeps the files asked for) instead of failing the
    stage: a task only sees the files it got, so it adds one ``FILE_READ`` row per file, and ``with_unread_files`` makes an ``unreadable_file`` issue of each listed file without one.
    Each file's ``RankFile`` reaches its row as the file's tag (JSON), and its job's shape
    numbers (``shape_ids``) as a column joined by job (broadcast), not in the function's closure,
    which every task would carry whole (the shape numbers of every job of the fleet)."""
    with_ids = shape_ids is not None

    def read_contents(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            read = [RankFile(*json.loads(tag)) for tag in batch.column(0).to_pylist()]
            contents = {f.path: content for f, content in zip(read, batch.column(1).to_pylist())}
            chosen = sorted(read, key=lambda f: (f.job_id, f.rel_path))
            if counts_only:
                yield from shape_count_batches(chosen, limits, contents)
            else:
                ids = _batch_shape_ids(read, batch.column(2).to_pylist()) if with_ids else None
                yield from arrow_batches(chosen, limits, batch_lines, raw=raw, shape=shape,
                                         shape_ids=ids, contents=contents)
            yield _read_marks(chosen)

    # Spark's scan skips empty files: their quarantine rows (empty_file) are made here
    empty = [f for f in files if f.size == 0]
    if counts_only:
        empty_rows = list(shape_count_batches(empty, limits, {f.path: b"" for f in empty}))
    else:
        empty_rows = list(arrow_batches(empty, limits, batch_lines, raw=raw, shape=shape,
                                        shape_ids=None if shape_ids is None else _task_shape_ids(empty, shape_ids),
                                        contents={f.path: b"" for f in empty}))
    empty_frame = spark.createDataFrame(pa.Table.from_batches(empty_rows, schema=_ARROW_SCHEMA), INGEST_SCHEMA)
    if not any(f.size for f in files):
        return empty_frame
    if kept is not None and kept.paths != frozenset(f.path for f in files):
        raise ValueError("kept bytes of other files than the read's")
    stored = kept.frame if kept is not None else _stored_bytes(spark, files)
    if stored is None:
        return empty_frame
    if with_ids:
        stored = _with_job_shape_ids(spark, stored, shape_ids)
    lines = stored.mapInArrow(read_contents, INGEST_SCHEMA)
    return lines.unionByName(empty_frame) if empty_rows else lines


def _stored_bytes(spark: SparkSession, files: Sequence[RankFile],
                  listing: RootListing | None = None) -> DataFrame | None:
    """``tag`` (the file's ``RankFile`` as JSON) and ``content`` of the non-empty ``files``, by
    Spark's ``binaryFile`` source (``fs.binary_files``, from the layout scan's ``listing`` of their
    root when given); None when none of them is left."""
    stored_files = [f for f in files if f.size]
    stored = binary_files(spark, [f.path for f in stored_files], folders=sorted({_job_folder(f) for f in files}),
                          tags=[json.dumps(dataclasses.astuple(f)) for f in stored_files], listing=listing)
    return None if stored is None else stored.select("tag", "content")


@dataclasses.dataclass(frozen=True)
class KeptBytes:
    """The stored bytes of a read's remote files, persisted by Spark (``kept_remote_bytes``)."""
    paths: frozenset[str]
    frame: DataFrame | None


@contextmanager
def kept_remote_bytes(spark: SparkSession, files: Sequence[RankFile], level: StorageLevel,
                      listing: RootListing | None = None) -> Iterator[KeptBytes | None]:
    """Remote ``files``' bytes, read from the storage once for all reads of them inside the
    block and kept by Spark at ``level`` (its block manager: the executors' memory or local
    disks) until the block ends; None for local files, which are read again instead (the page
    cache keeps them, and nothing is copied).

    The parse reads a run's files twice (line shapes, then lines). On HDFS every read of a file
    costs a NameNode call and a DataNode connection, on an object store a GET request (billed,
    and tens of milliseconds each): the second read cost about what the first did. Keeping the
    bytes took the storage bench's (592 files) events write from 4.0-5.7 s to 2.8-3.3 s and its
    shapes read from 1.8-2.3 s to 2.2-2.5 s: 1-3 s net (docs/capacity.md, session 17). The bytes kept are the files as
    stored (a ``.gz`` stays compressed), so the kept size is the run's stored size; the
    fallback that structures every line (``pipeline._parse_per_line``) keeps more than that.
    ``listing``: the layout scan's listing of the files' root (``LayoutScan.listing``), which the
    read plans from instead of listing the job folders again."""
    if not files or is_local(files[0].path):
        yield None
        return
    frame = _stored_bytes(spark, files, listing)
    if frame is not None:
        frame = frame.persist(level)
    try:
        yield KeptBytes(frozenset(f.path for f in files), frame)
    finally:
        if frame is not None:
            frame.unpersist()


def remote_scan_settings(spark: SparkSession, files: Sequence[RankFile]) -> dict[str, str]:
    """Session settings under which Spark lists remote rank files' job folders and packs the
    files into tasks by their bytes (``_read_remote_files``), about as ``plan_read_tasks`` packs
    local ones (at least two per core): ``fs.remote_scan_settings``; none for local files.
    Spark's defaults count each file 4 MB more than its size (``spark.sql.files.openCostInBytes``):
    for rank files of tens of KB that made tasks of equal file counts, not bytes, and many of them
    (19 for the 592 files, 22.5 MB, of the bench fleet, the first holding the largest files: 2 MB
    of events against 5 KB in the last), each a file of the Delta events write that HDFS makes
    wait at its close (docs/deploy.md). Set around the queries (``io.frames.session_settings``):
    Spark reads them when a query runs."""
    if not files or is_local(files[0].path):
        return {}
    return fs_remote_scan_settings(spark)


def _with_job_shape_ids(spark: SparkSession, stored: DataFrame, shape_ids: Mapping[str, Mapping[str, int]]) -> DataFrame:
    """``stored`` (``tag``, ``content``) plus ``shape_ids``: the JSON of its file's job's shape
    numbers, by a broadcast join on the job (the first field of the tag, a ``RankFile``)."""
    table = local_frame(spark, pa.table({"_job_id": pa.array(list(shape_ids), pa.string()),
                                         "shape_ids": pa.array([json.dumps(ids) for ids in shape_ids.values()],
                                                               pa.string())}))
    return (stored.withColumn("_job_id", F.get_json_object("tag", "$[0]"))
            .join(F.broadcast(table), on="_job_id", how="left")
            .select("tag", "content", "shape_ids"))


def _batch_shape_ids(files: Sequence[RankFile], shape_ids: Sequence[str | None]) -> dict[str, int]:
    """The shape numbers of the jobs of ``files``, from each file's ``shape_ids`` JSON (its job's,
    as ``_with_job_shape_ids`` joined it), each job's parsed once."""
    by_job = {rank_file.job_id: ids for rank_file, ids in zip(files, shape_ids)}
    return _task_shape_ids(files, {job_id: json.loads(ids) if ids else {} for job_id, ids in by_job.items()})


def _job_folder(rank_file: RankFile) -> str:
    """The folder of ``rank_file``'s job: its path up to the first part of its path under the root."""
    root = rank_file.path[:len(rank_file.path) - len(rank_file.rel_path)]
    return root + rank_file.rel_path.split("/", 1)[0]


def _read_marks(files: Sequence[RankFile]) -> pa.RecordBatch:
    """One ``FILE_READ`` row per file a remote read task got the bytes of."""
    columns: dict[str, list] = {name: [] for name in _ARROW_SCHEMA.names}
    for rank_file in files:
        _append_issue(columns, rank_file, Issue(rank_file.job_id, rank_file.rel_path, FILE_READ, "", n_lines=0))
    return _to_batch(columns)


def with_unread_files(issues: Sequence[Issue], files: Sequence[RankFile]) -> list[Issue]:
    """The files' issues of a read (the issue rows of ``read_rank_files``), its ``FILE_READ``
    rows replaced by an ``unreadable_file`` issue for each non-empty remote file that has none
    (the scan skipped it). A local read has no such rows and loses no file: its issues are kept."""
    kept = [issue for issue in issues if issue.reason != FILE_READ]
    if not files or is_local(files[0].path):
        return kept
    read = {(issue.job_id, issue.file) for issue in issues if issue.reason == FILE_READ}
    unread = [Issue(f.job_id, f.rel_path, "unreadable_file",
                    "cannot read the file: the storage refused it or it is gone since the listing "
                    "(Spark's executor log names the error)", n_lines=0)
              for f in files if f.size and (f.job_id, f.rel_path) not in read]
    return kept + unread


def arrow_batches(files: Sequence[RankFile], limits: ReadLimits, batch_lines: int, raw: bool = True,
                  shape: bool = False, shape_ids: Mapping[str, int] | None = None,
                  contents: Mapping[str, bytes] | None = None) -> Iterator[pa.RecordBatch]:
    """Read ``files`` in order into Arrow batches of about ``batch_lines`` rows (``contents``:
    their bytes by path, when read by Spark)."""
    columns: dict[str, list] = {name: [] for name in _ARROW_SCHEMA.names}
    fold = shape or shape_ids is not None
    for rank_file in files:
        for item in read_lines(rank_file, limits, fold=fold, content=_content(contents, rank_file)):
            if isinstance(item, Issue):
                _append_issue(columns, rank_file, item)
                continue
            line_nos, lines, shapes = _kept_lines(*item, fold=fold)
            count = len(lines)
            columns["job_id"] += [rank_file.job_id] * count
            columns["node"] += [rank_file.node] * count
            columns["rank"] += [rank_file.rank] * count
            columns["file"] += [rank_file.rel_path] * count
            columns["line_no"] += line_nos
            columns["raw"] += lines if raw else [None] * count
            columns["shape"] += shapes if shape else [None] * count
            columns["shape_id"] += map(shape_ids.get, shapes) if shape_ids is not None else [None] * count
            for name in ("issue", "detail", "n_lines", "n_bytes"):
                columns[name] += [None] * count
            if len(columns["line_no"]) >= batch_lines:
                yield _to_batch(columns)
    if columns["line_no"]:
        yield _to_batch(columns)


def _content(contents: Mapping[str, bytes] | None, rank_file: RankFile) -> bytes | None:
    return None if contents is None else contents[rank_file.path]


def shape_count_batches(files: Sequence[RankFile], limits: ReadLimits,
                        contents: Mapping[str, bytes] | None = None) -> Iterator[pa.RecordBatch]:
    """Read ``files`` and yield, per job, its distinct shapes with line count and first line."""
    columns: dict[str, list] = {name: [] for name in _ARROW_SCHEMA.names}
    by_job: dict[str, tuple[Counter, dict]] = {}
    for rank_file in files:
        counts, firsts = by_job.setdefault(rank_file.job_id, (Counter(), {}))
        for item in read_lines(rank_file, limits, fold=True, content=_content(contents, rank_file)):
            if isinstance(item, Issue):
                _append_issue(columns, rank_file, item)
                continue
            line_nos, lines, shapes = _kept_lines(*item, fold=True)
            counts.update(shapes)
            # files come in path order and blocks in line order, so the first block that shows a
            # shape holds its first line; zip over reversed lists lets the dict keep the earliest
            block_first = dict(zip(reversed(shapes), reversed(range(len(shapes)))))
            for shape_text in block_first.keys() - firsts.keys():
                index = block_first[shape_text]
                firsts[shape_text] = (rank_file.rel_path, line_nos[index], lines[index])
    for job_id, (counts, firsts) in by_job.items():
        for shape_text, n in counts.items():
            # raw: the shape's first line, whose real digits the template's display text shows
            file, line_no, raw = firsts[shape_text]
            for name, value in (("job_id", job_id), ("node", None), ("rank", None), ("file", file),
                                ("line_no", line_no), ("raw", raw), ("shape", shape_text), ("issue", None),
                                ("detail", None), ("n_lines", n), ("n_bytes", None), ("shape_id", None)):
                columns[name].append(value)
    if columns["job_id"]:
        yield _to_batch(columns)


def _kept_lines(first: int, lines: list[str | None], shapes: list[str] | None,
                fold: bool = False) -> tuple[Sequence[int], list[str], list[str] | None]:
    """Line numbers, texts and (``fold``) shapes of a block, without its set-aside (None) lines.
    Shapes the reader did not fold (a block off its fast path) are folded here."""
    if None in lines:
        numbered = [(first + i, line) for i, line in enumerate(lines) if line is not None]
        line_nos, lines, shapes = [n for n, _ in numbered], [line for _, line in numbered], None
    else:
        line_nos = range(first, first + len(lines))
    if fold and shapes is None:
        # lines hold no line ends, so one translate over the joined block folds them all
        shapes = fold_digits("\n".join(lines)).split("\n") if lines else []
    return line_nos, lines, shapes


def _append_issue(columns: dict[str, list], rank_file: RankFile, issue: Issue) -> None:
    values = {
        "job_id": rank_file.job_id, "node": rank_file.node, "rank": rank_file.rank, "file": rank_file.rel_path,
        "line_no": issue.line_no, "raw": issue.sample, "shape": None, "issue": issue.reason, "detail": issue.detail,
        "n_lines": issue.n_lines, "n_bytes": issue.n_bytes, "shape_id": None,
    }
    for name, value in values.items():
        columns[name].append(value)


def _to_batch(columns: dict[str, list]) -> pa.RecordBatch:
    arrays = [pa.array(columns[field.name], type=field.type) for field in _ARROW_SCHEMA]
    for values in columns.values():
        values.clear()
    return pa.RecordBatch.from_arrays(arrays, schema=_ARROW_SCHEMA)
