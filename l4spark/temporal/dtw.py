"""Pure per-job temporal analysis (no Spark): DTW iteration scores, three-sigma rule, progress.

Event ids are categories: each pair of sequences is one-hot encoded over the pair's own
vocabulary and compared with dtaidistance's multi-dimensional DTW, so the same event costs 0 and
two different events cost 2 (squared Euclidean of two one-hot rows), never a difference of ids.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from dtaidistance import dtw_ndim
from scipy.optimize import nnls

from l4spark.temporal.config import TemporalConfig

# A progress line enters the sequences as this prefix and its shape (``jobs.analyse_iterations``)
PROGRESS_TOKEN = "progress: "


def collapse(sequence: list[str], cap: int) -> list[str]:
    """Consecutive repeats collapsed (DTW warps over them anyway), then capped to ``cap`` events."""
    out: list[str] = []
    for event in sequence:
        if not out or out[-1] != event:
            out.append(event)
    return out[:cap]


def similarity(a: Sequence[str], b: Sequence[str]) -> float:
    """1 - (DTW mismatch cost / the worst possible), in [0, 1]; two equal sequences (two empty
    ones too) are identical: their DTW cost is 0, so they take no DTW."""
    if (not a and not b) or a == b:
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
    threshold: float  # the job's anomaly line: below it (and with a novel event) an iteration is anomalous
    anomalous: bool
    event_ids: tuple[str, ...]  # events of the iteration absent from its reference window
    novel: tuple[str, ...] = ()  # gated events no earlier iteration of the job had
    below_mean: bool = False  # judged, and at least min_drop below the job's mean score


def score_iterations(sequences: dict[int, list[str]], gate: set[str] | None,
                     conf: TemporalConfig = TemporalConfig()) -> list[IterationScore]:
    """Mean DTW similarity of each iteration to the previous ``conf.window`` ones; three-sigma rule.

    ``sequences``: iteration -> event ids in order. ``gate``: events allowed to make an
    iteration anomalous (the candidate / indicating events); None = any event. The first
    iteration holds the whole start of training: it is nobody's reference, and its score is 1.
    An iteration with at least ``min_reference`` references is judged: anomalous when its score
    is below the job's threshold, mean - sigma * std of the judged scores (and at least
    ``min_drop`` below the mean: std ~ 0 on a clean job), and it holds a gated event seen in no
    earlier iteration of the job (a recurring benign difference, such as a periodic evaluation,
    is not a new failure).
    """
    iterations = sorted(sequences)[-conf.max_iterations:]
    seqs = [tuple(collapse(sequences[i], conf.max_sequence)) for i in iterations]
    # A job's iterations mostly log the same sequence, so the same pairs come back window after
    # window: each distinct pair takes one DTW (issue #21: a warm batch of 30 failed jobs made
    # 127,850 DTWs, mostly dtaidistance's per-call set-up, most of the pandas call's time).
    alike = functools.cache(similarity)  # the job's pairs only: a new cache per call
    scores, novel, references = [], [], []
    seen: set[str] = set()
    for k, seq in enumerate(seqs):
        window = seqs[max(1, k - conf.window):k]
        references.append(len(window))
        scores.append(float(np.mean([alike(seq, ref) for ref in window])) if window else 1.0)
        ref_events = set().union(*window) if window else set()
        novel.append(tuple(sorted(e for e in set(seq) - ref_events if e not in seen and (gate is None or e in gate))))
        seen.update(seq)
    basis = [scores[k] for k in range(len(seqs)) if references[k] >= conf.min_reference] or scores
    mean = float(np.mean(basis)) if basis else 1.0
    std = float(np.std(basis)) if basis else 0.0
    threshold = round(min(mean - conf.sigma * std, mean - conf.min_drop), 6)
    out = []
    for k, it in enumerate(iterations):
        window_events = set().union(*seqs[max(0, k - conf.window):k]) if k else set()
        differing = tuple(sorted(set(seqs[k]) - window_events))[:50]
        judged = references[k] >= conf.min_reference
        anomalous = judged and scores[k] < threshold and bool(novel[k])
        out.append(IterationScore(int(it), round(scores[k], 6), threshold, anomalous, differing, novel[k],
                                  judged and scores[k] < mean - conf.min_drop))
    return out


RECOVERED, LASTING, SLOWER, ENDED = "recovered", "lasting", "slower", "ended"


def aftermath(iteration: int, events: tuple[str, ...], sequences: dict[int, list[str]],
              marks: list[tuple[int, float | None]], conf: TemporalConfig = TemporalConfig(),
              saved_at: tuple[int, ...] = ()) -> str:
    """What the job did after an anomalous ``iteration`` whose new events are ``events``.

    ``ended``: it completed fewer than ``conf.recovery_intervals`` more logged intervals (it
    stopped there: a failure); ``slower``: one of them was slower than ``slowdown_factor`` x its
    median iteration time before; ``lasting``: ``events`` recur in every one of them (a loss
    turned NaN for good); ``recovered``: none of these, the job got over it (a retried upload, a
    skipped sample, the first periodic evaluation): a fault in synchronous training stops or
    slows every rank within an interval, or changes what every iteration logs.
    ``marks``: (iteration, time) of the progress lines (time None or NaN when the line has no
    timestamp: then the pace is not checked); ``sequences`` as in ``score_iterations``.
    ``saved_at``: the iterations the job's checkpoint saves name. A logged interval a < b that
    held the save of an iteration n (a <= n < b: a save of step n follows step n's progress line)
    is not paced: the save's minutes are no slower training (fresh 36097: a MindSpeed loss turned
    NaN for good, and the interval of the routine save 14 iterations later, 2.0x the pace, made
    it ``slower``, so the change was never placed).
    """
    timed = sorted((i, t) for i, t in marks if t is not None and not math.isnan(t))
    per_iter = {b[0]: (b[1] - a[1]) / (b[0] - a[0]) for a, b in zip(timed, timed[1:])
                if b[0] > a[0] and not any(a[0] <= n < b[0] for n in saved_at)}
    completed = sorted({i for i, _ in marks if i >= iteration})  # the first completes the iteration itself
    after = completed[1:conf.recovery_intervals + 1]
    if len(after) < conf.recovery_intervals:
        return ENDED
    before = [v for i, v in per_iter.items() if i < iteration] or list(per_iter.values())
    usual = float(np.median(before)) if before else None
    if usual and any(per_iter.get(i, 0.0) > conf.slowdown_factor * usual for i in after):
        return SLOWER
    # the interval ending at progress line i holds the iterations after the previous line, up to i
    buckets = sorted(sequences)
    intervals = [[b for b in buckets if prev < b <= i] for prev, i in zip(completed, after)]
    if events and all(any(set(events) & set(sequences[b]) for b in interval) for interval in intervals):
        return LASTING
    if replaced_period(iteration, events, sequences, conf) is not None:
        return LASTING
    return RECOVERED


def replaced_period(iteration: int, events: tuple[str, ...], sequences: dict[int, list[str]],
                    conf: TemporalConfig = TemporalConfig()) -> int | None:
    """The period, in logged intervals (``sequences``' buckets), of the progress line that a new
    progress shape in ``events`` replaced for good at ``iteration``, or None.

    A line printed every few logged intervals (HF Trainer's log dict every ``logging_steps``
    beside its per-step tqdm bar) is not in every interval after a change, so "the new events
    recur in every interval" cannot see its loss turn nan for good. Its own terms can: the new
    shape recurs at least ``recovery_intervals`` times after ``iteration``, and a progress shape the
    job printed at least as often before, and was due (its last print within two of its periods
    of ``iteration``), never comes back. A transient nan (an fp16 overflow step) is followed by
    the normal dict again; a tqdm bar switching to s/it comes back when the pace does.
    """
    new = {e for e in events if e.startswith(PROGRESS_TOKEN)}
    if not new:
        return None
    buckets = sorted(sequences)
    if sum(1 for b in buckets if b > iteration and new & set(sequences[b])) < conf.recovery_intervals:
        return None
    since = {t for b in buckets if b >= iteration for t in sequences[b]}
    now = sum(1 for b in buckets if b < iteration)  # the position of ``iteration``'s interval
    printed: dict[str, list[int]] = {}
    for position, b in enumerate(buckets[:now]):
        for token in set(sequences[b]):
            if token.startswith(PROGRESS_TOKEN) and token not in since:
                printed.setdefault(token, []).append(position)
    due = []
    for at in printed.values():
        if len(at) >= conf.recovery_intervals:
            period = float(np.median(np.diff(at)))
            if now - at[-1] <= 2 * period:
                due.append(period)
    return max(int(min(due)), 1) if due else None


@dataclass(frozen=True)
class Progress:
    last_iteration: int | None  # last iteration a progress line reported
    stride: int  # iterations between progress lines (log interval)
    iteration_seconds: float | None  # median time per iteration
    stalled: bool  # the job's last line came much later than the next progress line was due
    slowdown_from: int | None  # first slow iteration when iteration time grew until the end
    failure_iteration: int | None


def analyse_progress(marks: list[tuple[int, float | None]], last_t: float | None, first_error_t: float | None,
                     conf: TemporalConfig = TemporalConfig(), began_t: float | None = None,
                     paced: list[tuple[int, float]] | None = None, open_interval: bool = False,
                     saves: tuple[int, float, float] | None = None,
                     stated: list[tuple[int, float]] | None = None, saved_at: tuple[int, ...] = ()) -> Progress:
    """Hangs and slowdowns from the progress lines of a job.

    ``marks``: (iteration, time) of iteration lines (times of one clock; None or NaN for a line
    without a timestamp, which still counts its iteration); ``last_t``: time of the
    job's last line on that clock; ``first_error_t``: time of the first failure-indicating line
    after the last progress line (None if unknown). The running iteration when the job broke is
    the one after the last progress line, advanced by the time elapsed until the first error
    (at most to the next progress line; without a time, to the middle of the log interval); a
    slowdown moves it back to where iterations got slow. ``began_t``: when a line says the
    failure began (a watchdog that gave up after N ms); it places the failure even in a stalled
    job, whose first error comes only when a timeout fires. ``paced``: (iteration, seconds on
    the progress line's own clock: a tqdm bar's elapsed time) for progress lines without a
    timestamp; when fewer than three progress lines are timed, it gives the pace and slowdowns
    (not the failure time: that clock is not the job's). ``open_interval``: the job ended while
    training, so the time from its last progress line to its last line is a training interval that
    did not complete (with ``conf.slowdown_open_interval``, it counts for slowdowns unless the job
    stalled or a line says when the failure began). ``saves``: (step N, time, seconds per step): the
    job's last timed checkpoint save that names its step (begun when step N was done), the time of
    its last timed line, and the pace between such saves (less the saves' own lines); with
    ``conf.pace_from_saves``, when the last progress line has no time and no timed progress line
    came after step N, the stop is N + 1 advanced by the time from that save's last line to
    ``first_error_t`` (or ``began_t``) over that pace, within the log interval after the last
    progress line; with ``conf.pace_from_earlier_marks``, when the last
    progress lines have no time but an earlier one has, the stop is that line's iteration + 1
    advanced by the time from it to the first error over the pace, within the log interval after
    the last progress line (when the error came after that line was due by the pace and less than
    an interval and an iteration later). A first error later than one iteration past the
    next progress line's due time places nothing (``conf.late_error_mid_interval``; the middle),
    an earlier one places the stop even in a stalled job (``conf.early_error_places_stall``).
    ``stated``: (iteration, seconds per iteration the progress line states for the interval it
    closes: ``pace_rules``); a slowdown is looked for in them first, the framework's own timer
    being finer than time stamps to the second, then in the times as before. ``saved_at``: the
    iterations the job's checkpoint saves name; with ``conf.save_out_of_pace``, a save begun after
    the last progress line is taken out of the time since it (``_save_seconds``).
    """
    iterations = sorted({i for i, _ in marks})
    if not iterations:
        return Progress(None, 1, None, False, None, None)
    last_it = iterations[-1]
    steps = [b - a for a, b in zip(iterations, iterations[1:])]
    stride = int(np.median(steps)) if steps else 1
    # times: progress lines without a timestamp (tqdm bars) still count iterations, not seconds
    marks = sorted({i: t for i, t in marks if t is not None and not math.isnan(t)}.items())
    # the pace on the job's clock (timestamped progress lines), else on the progress line's own clock
    on_job_clock = not (len(marks) < 3 and paced)
    pace = marks if on_job_clock else sorted({i: t for i, t in paced if t is not None and not math.isnan(t)}.items())
    per_iter = _seconds_per_iteration(pace)
    seconds = float(np.median(per_iter)) if per_iter else None
    last_mark_t = marks[-1][1] if marks and marks[-1][0] == last_it else None
    # a save begun after the last progress line delays the next one by the save's length
    saving_s = (_save_seconds(marks, saved_at, seconds)
                if conf.save_out_of_pace and on_job_clock and seconds and any(n >= last_it for n in saved_at) else 0.0)
    stalled = bool(seconds and last_t is not None and last_mark_t is not None
                   and last_t - last_mark_t - saving_s > conf.hang_factor * stride * seconds)
    slowdown = _stated_slowdown(stated, stride, conf) if stated else None
    if slowdown is None:
        slowdown = _slowdown_onset(pace, per_iter, stride, conf)
    if (slowdown is None and open_interval and conf.slowdown_open_interval and not stalled and began_t is None
            and on_job_clock and last_t is not None and last_mark_t is not None and last_t > last_mark_t):
        # the open interval, from the last progress line to the job's last line, had not completed
        # ``stride`` iterations: at least (its length / stride) seconds each. A job cancelled while
        # slowing down shows one slow closed interval and this one (not a stalled job: that is a hang)
        opened = [*pace, (last_it + stride, float(last_t))]
        slowdown = _slowdown_onset(opened, _seconds_per_iteration(opened), stride, conf)
    if slowdown is None:
        # then over spans of slowdown_min_span_s at least: a line stamped to the second reads a
        # 10.6 s step as 10 or 11 s and a 13.4 s one as 13 or 14 s, so interval by interval a
        # 1.26x straggler is lost in the rounding (fresh seed 14013); over 20 s it is not
        spans = _spans(pace, conf.slowdown_min_span_s)
        if len(spans) < len(pace):
            slowdown = _slowdown_onset(spans, [(b[1] - a[1]) / (b[0] - a[0]) for a, b in zip(spans, spans[1:])],
                                       stride, conf)
    failure = last_it + 1
    broke_t = began_t if began_t is not None else first_error_t
    late = bool(began_t is None and broke_t is not None and seconds and last_mark_t is not None
                and broke_t - last_mark_t - saving_s >= (stride + 1) * seconds)
    if late and (stalled or conf.late_error_mid_interval):
        # the first error came after the next progress line was due (one iteration of slack): the
        # job had stopped before it, and the error is a timeout's (HCCL's 1800 s is less than five
        # intervals of a slow job, so such a job need not count as stalled); nothing times the stop
        broke_t = None
    elif stalled and began_t is None and not conf.early_error_places_stall:
        broke_t = None
    if seconds and broke_t is not None and last_mark_t is not None and broke_t > last_mark_t:
        failure += min(stride - 1, int(max(broke_t - last_mark_t - saving_s, 0.0) / seconds))
    elif (conf.pace_from_saves and saves is not None and last_mark_t is None and broke_t is not None
          and saves[2] > 0 and broke_t > saves[1] and not (marks and marks[-1][0] > saves[0])):
        # untimed progress lines (HF Trainer's log dicts): the timed saves are the clock, unless a
        # timed progress line came after the last save. The save of step N starts when step N is
        # done; training goes on after its last line
        saved_it, saved_t, saved_s = saves
        failure = min(last_it + stride, max(last_it + 1, saved_it + 1 + int((broke_t - saved_t) / saved_s)))
    elif (conf.pace_from_earlier_marks and on_job_clock and seconds and broke_t is not None and last_mark_t is None
          and marks and marks[-1][0] < last_it
          and 0 < broke_t - (marks[-1][1] + (last_it - marks[-1][0]) * seconds) < (stride + 1) * seconds):
        # the last progress lines have no time but earlier ones do (Megatron-DeepSpeed: its progress
        # line is undated, DeepSpeed's ``step=N`` line is dated every ``steps_per_print`` steps): the
        # stop by the pace from the last timed one, within the interval after the last progress line
        anchor_it, anchor_t = marks[-1]
        failure = min(last_it + stride, max(last_it + 1, anchor_it + 1 + int((broke_t - anchor_t) / seconds)))
    else:
        # nothing timed tells where in the interval it broke (or, stalled, only when a watchdog
        # gave up long after): its middle, the estimate with the least expected error
        failure += (stride - 1) // 2
    if slowdown is not None:
        failure = slowdown
    return Progress(int(last_it), stride, seconds, stalled, slowdown, int(failure))


def _save_seconds(marks: list[tuple[int, float]], saved_at: tuple[int, ...], seconds: float) -> float:
    """The typical length of a checkpoint save: over the logged intervals (consecutive timed
    progress lines a < b) that held the save of an iteration n, a <= n < b, the median of the
    interval's time beyond (b - a) iterations at ``seconds`` each; 0 when no earlier save was
    logged inside such an interval or saves take no visible time."""
    its = np.array([i for i, _ in marks])
    times = np.array([t for _, t in marks])
    held = np.unique(np.searchsorted(its, np.asarray(saved_at), side="right") - 1)
    held = held[(held >= 0) & (held < len(its) - 1)]  # a save after the last line held no closed interval
    if not len(held):
        return 0.0
    excess = times[held + 1] - times[held] - (its[held + 1] - its[held]) * seconds
    return max(float(np.median(excess)), 0.0)


def _stated_slowdown(stated: list[tuple[int, float]], stride: int, conf: TemporalConfig) -> int | None:
    """``_slowdown_onset`` over the seconds per iteration the progress lines state (``stated``:
    iteration, the pace of the interval that line closes; one reading per iteration, the first
    line's describing an interval that began before the first line and left out). The marks are
    a clock of their own: the stated intervals laid end to end."""
    readings = sorted(dict(stated).items())
    if len(readings) < 2:
        return None
    clock = [(readings[0][0], 0.0)]
    for (before, _), (it, seconds) in zip(readings, readings[1:]):
        clock.append((it, clock[-1][1] + (it - before) * seconds))
    return _slowdown_onset(clock, [seconds for _, seconds in readings[1:]], stride, conf)


def _spans(marks: list[tuple[int, float]], min_span_s: float) -> list[tuple[int, float]]:
    """``marks`` thinned so that consecutive ones lie at least ``min_span_s`` apart (the first
    and the last kept): the pace of a job whose progress lines come faster than that."""
    if len(marks) < 3 or min_span_s <= 0:
        return marks
    kept = [marks[0]]
    for mark in marks[1:-1]:
        if mark[1] - kept[-1][1] >= min_span_s:
            kept.append(mark)
    if marks[-1][1] - kept[-1][1] < min_span_s and len(kept) > 1:
        kept.pop()  # the last span reaches the last mark, however short the rest
    return [*kept, marks[-1]]


def _seconds_per_iteration(pace: list[tuple[int, float]]) -> list[float]:
    """Seconds per iteration of each interval between consecutive (iteration, time) marks."""
    return [(b[1] - a[1]) / (b[0] - a[0]) for a, b in zip(pace, pace[1:])]


def _slowdown_onset(marks: list[tuple[int, float]], per_iter: list[float], stride: int,
                    conf: TemporalConfig) -> int | None:
    """First slow iteration: from the first interval after which every interval is slower than
    ``slowdown_factor`` x the median before it, back through the intervals already above
    ``slowdown_band`` x that median (a slowdown ramps up: a throttled clock, a failing link
    retrying more and more); inside the first slow interval, placed by its excess time."""
    n = len(per_iter)
    for k in range(3, n - conf.slowdown_min_intervals + 1):
        base = float(np.median(per_iter[:k]))
        later = per_iter[k:]
        if base > 0 and min(later) > conf.slowdown_factor * base:
            slow = float(np.median(later))
            while k > 0 and per_iter[k - 1] > conf.slowdown_band * base:
                k -= 1
            return _onset_fit(marks, per_iter, base, k) if slow > base else int(marks[k][0] + 1)
    return None


SPIKE = 1.3


def _onset_fit(marks: list[tuple[int, float]], pace: list[float], base: float, k: int,
               before: int = 2, after: int = 4) -> int:
    """The first slow iteration, for a slowdown whose first interval above the band is ``k``
    (spanning marks[k] -> marks[k + 1], at ``pace[k]`` seconds per iteration): a change point fitted to the interval durations around
    it. Model: an iteration takes ``base`` before the onset ``o`` and ``base + h + s * (i - o)``
    from it (a step, a ramp, or both; h, s >= 0, least squares), fitted over ``before``
    intervals before k and ``after`` from it; ``o`` is searched from the interval before k (a
    ramp's first interval may stay under the band) to the end of interval k, and the best fit
    wins (the earliest on a tie); an interval over ``SPIKE`` x the pace of both neighbours is
    left out (a checkpoint save or an evaluation lengthens one interval). A ramp's first interval
    is only a little slow, so placing the onset by that interval's share of the later slowness
    put it late."""
    first, last = max(0, k - before), min(len(marks) - 2, k + after)
    rows = [(np.arange(marks[j][0] + 1, marks[j + 1][0] + 1), marks[j + 1][1] - marks[j][1])
            for j in range(first, last + 1)
            # an interval much slower than both neighbours held a checkpoint save or an evaluation
            if not (0 < j < len(pace) - 1 and pace[j] > SPIKE * max(pace[j - 1], pace[j + 1]))]
    excess = np.array([duration - base * len(its) for its, duration in rows])
    best_o, best_error = marks[k][0] + 1, math.inf
    for o in range(marks[max(k - 1, 0)][0] + 1, marks[k + 1][0] + 1):
        design = np.array([[float((its >= o).sum()), float(np.clip(its - o, 0, None).sum())] for its, _ in rows])
        _, residual = nnls(design, excess)
        if residual < best_error - 1e-9:
            best_o, best_error = o, residual
    return int(best_o)
