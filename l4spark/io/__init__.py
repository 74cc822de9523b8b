"""The warehouse: where the tables live and how they are written, the writer lock, the Spark session.

In: a ``StorageConfig`` / ``SparkConfig`` and DataFrames to write.
Out: per-job atomic table replacement, small atomic files, one writer at a time.
"""
