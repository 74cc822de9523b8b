"""Evaluation of l4spark against published benchmarks (parsing accuracy on Loghub-2k, ...)."""
