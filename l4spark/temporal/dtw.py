"""Pure per-job temporal analysis (no Spark): DTW iteration scores, three-sigma rule, progress.

Event ids are categories: each pair of sequences is one-hot encoded over the pair's own
vocabulary and compared with dtaidistance's multi-dimensional DTW, so the same event costs 0 and
two different events cost 2 (squared Euclidean of two one-hot rows), never a difference of ids.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from dtaidistance import dtw_ndim

from l4spark.temporal.config import TemporalConfig


def collapse(sequence: list[str], cap: int) -> list[str]:
    """Consecutive repeats collapsed (DTW warps over them anyway), then capped to ``cap`` events."""
    out: list[str] = []
    for event in sequence:
        if not out or out[-1] != event:
            out.append(event)
    return out[:cap]


def similarity(a: list[str], b: list[str]) -> float:
    """1 - (DTW mismatch cost / the worst possible), in [0, 1]; two empty sequences are identical."""
    if not a and not b:
        return 1.0
    if not a or not b:
        return 0.0
    vocab = {e: i for i, e in enumerate(dict.fromkeys(a + b))}
    one_hot_a = np.zeros((len(a), len(vocab)))
    one_hot_a[np.arange(len(a)), [vocab[e] for e in a]] = 1.0
    one_hot_b = np.zeros((len(b), len(vocab)))
    one_hot_b[np.arange(len(b)), [vocab[e] for e in b]] = 1.0
    cost = round(dtw_ndim.distance(one_hot_a, one_hot_b, use_c=True) ** 2 / 2.0)  # mismatched steps
    return max(0.0, 1.0 - cost / max(len(a), len(b)))


@dataclass(frozen=True)
class IterationScore:
    iteration: int
    score: float
    anomalous: bool
    event_ids: tuple[str, ...]  # events of the iteration absent from its reference window


def score_iterations(sequences: dict[int, list[str]], gate: set[str] | None,
                     conf: TemporalConfig = TemporalConfig()) -> list[IterationScore]:
    """Mean DTW similarity of each iteration to the previous ``conf.window`` ones; three-sigma rule.

    ``sequences``: iteration -> event ids in order. ``gate``: events allowed to make an
    iteration anomalous (the candidate / indicating events); None = any event. An iteration is
    anomalous when its score is below mean - sigma * std (and ``min_drop`` below the mean) and
    it holds a gated event seen in no earlier iteration of the job (a recurring benign
    difference, such as a periodic evaluation, is not a new failure). The first iteration has
    no reference and gets score 1.
    """
    iterations = sorted(sequences)[-conf.max_iterations:]
    seqs = [collapse(sequences[i], conf.max_sequence) for i in iterations]
    scores, novel = [], []
    seen: set[str] = set()
    for k, seq in enumerate(seqs):
        window = seqs[max(0, k - conf.window):k]
        scores.append(float(np.mean([similarity(seq, ref) for ref in window])) if window else 1.0)
        ref_events = set().union(*window) if window else set()
        novel.append(tuple(sorted(e for e in set(seq) - ref_events if e not in seen and (gate is None or e in gate))))
        seen.update(seq)
    mean = float(np.mean(scores)) if scores else 1.0
    std = float(np.std(scores)) if scores else 0.0
    threshold = min(mean - conf.sigma * std, mean - conf.min_drop)
    out = []
    for k, it in enumerate(iterations):
        window_events = set().union(*seqs[max(0, k - conf.window):k]) if k else set()
        differing = tuple(sorted(set(seqs[k]) - window_events))[:50]
        anomalous = k > 0 and scores[k] < threshold and bool(novel[k])
        out.append(IterationScore(int(it), round(scores[k], 6), anomalous, differing))
    return out


@dataclass(frozen=True)
class Progress:
    last_iteration: int | None  # last iteration a progress line reported
    stride: int  # iterations between progress lines (log interval)
    iteration_seconds: float | None  # median time per iteration
    stalled: bool  # the job's last line came much later than the next progress line was due
    slowdown_from: int | None  # first slow iteration when iteration time grew until the end
    failure_iteration: int | None


def analyse_progress(marks: list[tuple[int, float]], last_t: float | None, first_error_t: float | None,
                     conf: TemporalConfig = TemporalConfig()) -> Progress:
    """Hangs and slowdowns from the progress lines of a job.

    ``marks``: (iteration, time) of iteration lines (times of one clock); ``last_t``: time of the
    job's last line on that clock; ``first_error_t``: time of the first failure-indicating line
    after the last progress line (None if unknown). The running iteration when the job broke is
    the one after the last progress line, advanced by the time elapsed until the first error
    (at most to the next progress line); a slowdown moves it back to where iterations got slow.
    """
    marks = sorted({i: t for i, t in marks if t is not None and not math.isnan(t)}.items())
    if not marks:
        return Progress(None, 1, None, False, None, None)
    last_it, last_mark_t = marks[-1]
    gaps = [(b[0] - a[0], (b[1] - a[1]) / (b[0] - a[0])) for a, b in zip(marks, marks[1:]) if b[0] > a[0]]
    stride = int(np.median([g[0] for g in gaps])) if gaps else 1
    per_iter = [g[1] for g in gaps]
    seconds = float(np.median(per_iter)) if per_iter else None
    stalled = bool(seconds and last_t is not None and last_t - last_mark_t > conf.hang_factor * stride * seconds)
    slowdown = _slowdown_onset(marks, per_iter, stride, conf)
    failure = last_it + 1
    if seconds and first_error_t is not None and not stalled and first_error_t > last_mark_t:
        failure += min(stride - 1, int((first_error_t - last_mark_t) / seconds))
    if slowdown is not None:
        failure = slowdown
    return Progress(int(last_it), stride, seconds, stalled, slowdown, int(failure))


def _slowdown_onset(marks: list[tuple[int, float]], per_iter: list[float], stride: int,
                    conf: TemporalConfig) -> int | None:
    n = len(per_iter)
    for k in range(3, n - conf.slowdown_min_intervals + 1):
        base = float(np.median(per_iter[:k]))
        later = per_iter[k:]
        if base > 0 and min(later) > conf.slowdown_factor * base:
            slow = float(np.median(later))
            # interval k spans marks[k] -> marks[k + 1]; the part of it already slow:
            if k > 0 and per_iter[k - 1] > base * 1.1 and slow > base:
                k -= 1
            start, end = marks[k][0], marks[k + 1][0]
            share = min(1.0, max(0.0, (per_iter[k] - base) / (slow - base))) if slow > base else 1.0
            return int(end - round(share * (end - start)) + 1)
    return None
