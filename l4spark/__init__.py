"""l4spark: diagnose failed large-scale LLM training jobs from their logs on Apache Spark."""

__version__ = "0.1.0"
