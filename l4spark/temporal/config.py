"""Temporal configuration: stage markers, iteration markers, DTW and progress thresholds.

Defaults live in code; the conf's ``[temporal]`` table overrides them (built by ``l4spark.config.load_config``). Regexes
are Java regexes searched anywhere in the event's ``message`` (never anchored on a header: a
header the parser could not strip stays in the message).
"""

from __future__ import annotations

from dataclasses import dataclass

from l4spark.regexsafety import UnsafeRegexError, check_regex

STAGES = ("init", "data_loading", "model_loading", "training", "checkpoint_saving", "finished")


@dataclass(frozen=True)
class StageRule:
    """A line whose message matches ``pattern`` starts ``stage`` in its rank file. With
    ``names_iteration``, group 1 of ``pattern`` is the iteration the stage works on: a
    checkpoint save names the iteration it saves, and a job that dies in the save failed there."""

    stage: str
    pattern: str
    names_iteration: bool = False


@dataclass(frozen=True)
class IterationRule:
    """A progress line; the first capture group is the number of the iteration it ends."""

    pattern: str


@dataclass(frozen=True)
class CountedIterationRule:
    """Progress lines that carry no iteration number (HF Trainer's log dicts when tqdm bars are
    off): the k-th one in a rank file ends iteration start + k * interval. ``interval_pattern``
    and ``start_pattern`` are searched in the job's lines, group 1 the number (the logging
    interval; the step training resumed from, 0 when no line says). Without an interval line,
    such lines number nothing; in a file with numbered progress lines they are not counted."""

    pattern: str
    interval_pattern: str
    start_pattern: str = ""


# Ordered: the first matching rule names the stage. Rules of several frameworks share one list
# (a job of another framework simply never matches them).
DEFAULT_STAGE_RULES: tuple[StageRule, ...] = (
    # finished
    StageRule("finished", r"\[after training is done\]"),
    StageRule("finished", r"Training completed\. Do not forget"),
    StageRule("finished", r"worker group successfully finished"),
    StageRule("finished", r"Process \d+ exits successfully"),
    StageRule("finished", r"(validation|test) loss at iteration \d+ on (validation|test) set"),
    # torchtitan train.py Trainer.train: "Training completed" (its whole message)
    StageRule("finished", r"^Training completed$"),
    # checkpoint saving: from the save's first line to its last (or the next progress line: HF
    # Trainer prints nothing when a save ends). Where each line was seen:
    # Megatron-LM / MindSpeed-LLM / Megatron-DeepSpeed megatron/training/checkpointing.py save_checkpoint:
    #   "saving checkpoint at iteration {:7d} to {} in {} format" ... (barrier) ...
    #   "  successfully saved checkpoint from iteration {:7d} to {} [ t i/T, p j/P ]" (before 2024:
    #   "  successfully saved checkpoint at iteration {:7d} to {}")
    StageRule("checkpoint_saving", r"saving checkpoint at iteration\s+(\d+)", names_iteration=True),
    # DeepSpeed runtime/engine.py save_checkpoint + checkpoint_engine/torch_checkpoint_engine.py:
    #   "[Torch] Checkpoint {tag} is about to be saved!" (create; [AsyncTorch], [DataStates] alike),
    #   "Saving model checkpoint: {path}", "[Torch] Saving {path}...", per-rank zero shards, then,
    #   after the barrier, "[Torch] Checkpoint {tag} is ready now!" (commit); the default tag is
    #   global_step{N}
    StageRule("checkpoint_saving", r"Checkpoint global_step(\d+) is about to be saved", names_iteration=True),
    StageRule("checkpoint_saving", r"Saving model checkpoint: \S*global_step(\d+)", names_iteration=True),
    # transformers trainer.py _save / _save_checkpoint: "Saving model checkpoint to {output_dir}",
    # output_dir = {args.output_dir}/checkpoint-{global_step} (4.36-4.37 stage it in tmp-checkpoint-N
    # and rename it at the end: huggingface/transformers#27925); then model, tokenizer, optimizer,
    # scheduler and RNG state are written without a closing line
    StageRule("checkpoint_saving", r"Saving model checkpoint to \S*checkpoint-(\d+)", names_iteration=True),
    StageRule("checkpoint_saving", r"Saving model checkpoint"),
    StageRule("checkpoint_saving", r"Checkpoint \S+ is about to be saved"),
    StageRule("checkpoint_saving", r"\[Torch\] Saving \S+zero_pp_rank"),
    # torchtitan components/checkpoint.py CheckpointManager.save (every step that is due, on every
    # rank): "Saving the checkpoint (or staging if async is enabled)." ... "Finished saving the
    # checkpoint (or staging if async is enabled)in {s:.2f} seconds."; it names no step (the step
    # just done, whose progress line came before it)
    StageRule("checkpoint_saving", r"^Saving the checkpoint \(or staging if async is enabled\)"),
    StageRule("training", r"^Finished saving the checkpoint \(or staging if async is enabled\)"),
    StageRule("training", r"successfully saved checkpoint (from|at) iteration"),
    StageRule("training", r"Checkpoint \S+ is ready now"),
    # training
    StageRule("training", r"\[before the start of training step\]"),
    StageRule("training", r"^\s*training \.\.\.\s*$"),
    StageRule("training", r"\*\*\*\*\* Running training \*\*\*\*\*"),
    StageRule("training", r"Total training samples: \d+"),
    # torchtitan train.py: "Training starts at step {step + 1}." after the checkpoint load
    StageRule("training", r"^Training starts at step \d+"),
    # model loading
    StageRule("model_loading", r"building \S+ model"),
    StageRule("model_loading", r"loading checkpoint from"),
    StageRule("model_loading", r"\[Torch\] Loading checkpoint from"),
    StageRule("model_loading", r"Unable to find latest file at"),
    StageRule("model_loading", r"successfully read \d+ ZeRO state_dicts"),
    StageRule("model_loading", r"loading configuration file \S+config\.json"),
    StageRule("model_loading", r"Loading checkpoint shards"),
    # torchtitan: train.py "Building {name} {flavor} with {model_args}" (model args' dataclass
    # repr), components/checkpoint.py "Loading the checkpoint from {checkpoint_id}."
    StageRule("model_loading", r"^Building \S+ \S+ with \w*Args\("),
    StageRule("model_loading", r"^Loading the checkpoint from \S"),
    # data loading. Megatron-LM / MindSpeed-LLM / Megatron-DeepSpeed training.py
    # build_train_valid_test_data_iterators: "> building train, validation, and test datasets ...",
    # ... "> finished creating GPT datasets ..." (ends at "training ..."); HF datasets (used by HF
    # Trainer and DeepSpeed scripts) load.py / builder.py / arrow_dataset.py: "Using custom data
    # configuration", "Found cached dataset {name} ({dir})" ("Reusing dataset" before 2.x),
    # "Loading cached processed dataset at {cache_file}", "Loading cached shuffled indices for
    # dataset at {file}", "Generating train split"
    StageRule("data_loading", r"building train, validation, and test datasets"),
    StageRule("data_loading", r"Loading dataset shards from"),
    StageRule("data_loading", r"Using custom data configuration"),
    StageRule("data_loading", r"Running tokenizer on dataset"),
    StageRule("data_loading", r"Found cached dataset \S+"),
    StageRule("data_loading", r"Reusing dataset \S+ \("),
    StageRule("data_loading", r"Loading cached (processed dataset|shuffled indices for dataset|sorted indices for dataset) at"),
    StageRule("data_loading", r"Generating (train|validation|test) split"),
    # torchtitan datasets/hf_datasets.py: "Preparing {dataset_name} dataset from {path}", before
    # the model is built (the dataset streams: its reads go on while training)
    StageRule("data_loading", r"^Preparing \S+ dataset from \S"),
)

DEFAULT_ITERATION_RULES: tuple[IterationRule, ...] = (
    IterationRule(r"\biteration\s+(\d+)\s*/\s*\d+\s*\|"),  # Megatron-LM, MindSpeed
    IterationRule(r"\bstep=(\d+), skipped="),  # DeepSpeed log_dist
    IterationRule(r"^\s*\d+%\|[^|]*\|\s*(\d+)/\d+ \["),  # tqdm bars (HF Trainer)
    # torchtitan components/metrics.py MetricsProcessor.log, every log_freq steps:
    # f"{color.red}step: {step:2}  {color.green}loss: {loss:7.4f}  ..." (ANSI colours unless
    # --metrics.disable_color_printing; "step: 640/644 = 99.3789%  loss: ..." in some versions)
    IterationRule(r"(?:^|\x1b\[[0-9;]*m)step:\s*(\d+)(?:/\d+ = [0-9.]+%)?\s+(?:\x1b\[[0-9;]*m)?loss:"),
)


DEFAULT_COUNTED_ITERATION_RULES: tuple[CountedIterationRule, ...] = (
    # HF Trainer: {'loss': ..., 'epoch': ...} every logging_steps (TrainingArguments dump), from
    # the step a resumed run continues at
    CountedIterationRule(r"^\s*\{'loss': ", r"\blogging_steps=(\d+)", r"Continuing training from global step (\d+)"),
)


# A line saying how long the operation it reports had been running when it gave up (group 1,
# milliseconds): the failure began that long before the line (PyTorch's NCCL watchdog).
DEFAULT_ELAPSED_RULES: tuple[str, ...] = (
    r"ran for (\d+) milliseconds before timing out",
)

# A progress line that counts its log interval's bad iterations (group 1): a lasting change
# (a loss turned NaN) that the closing line of its first interval counts N times began at that
# line's iteration - N + 1 (Megatron-LM resets these counters after every log line).
DEFAULT_BAD_COUNT_RULES: tuple[str, ...] = (
    r"number of nan iterations:\s*(\d+)",
)

# A progress line printing a metric as not a number or infinite (HF Trainer's ``'grad_norm': nan``,
# Megatron-LM's ``lm loss: NAN`` from Python's ``{:E}`` format, ``loss=inf``): its shape is an
# indicating event of the job, whatever the cross-job filter said of the line's template (normal
# and nan dicts are one template, printed by every HF job). A transient nan (an fp16 overflow
# step) is anomalous but no lasting change; a loss that stays nan is where the job changed.
DEFAULT_NONFINITE_RULES: tuple[str, ...] = (
    r"(?i)[:=]\s*'?[+-]?(?:nan|inf|infinity)\b",
)

# The elapsed time a progress line without a timestamp carries, as (hours, optional), minutes,
# seconds in groups 1-3: tqdm's "[38:46:03<13:21, 400.65s/it]". It paces a job whose progress
# lines are untimed (HF Trainer's bars), so that slowdowns show.
DEFAULT_PROGRESS_CLOCK_RULES: tuple[str, ...] = (
    r"^\s*\d+%\|[^|]*\|\s*\d+/\d+ \[(?:(\d+):)?(\d+):(\d+)<",
)

# The seconds per iteration a progress line states for its own log interval (group 1, in ms):
# Megatron-LM's ``training_log`` prints `` elapsed time per iteration (ms): 941.7 |`` (its
# ``interval-time`` timer over the interval, divided by the iterations in it; MindSpeed-LLM and
# Megatron-DeepSpeed print the same, some forks as ``941.7/933.2`` with a running mean). The
# framework's own timer paces slowdowns where the line's time stamp is to the second: a 0.8 s step
# logged every iteration reads as 0, 1 or 2 s per interval (``analyse_progress``'s ``stated``).
DEFAULT_PACE_RULES: tuple[str, ...] = (
    r"(?i)elapsed time per iteration \(ms\):\s*([0-9]+(?:\.[0-9]+)?)",
)


# Session 57: texts saying that a DataLoader's worker failed (PyTorch torch/utils/data/dataloader.py
# and torch/csrc/DataLoader.cpp): "RuntimeError: DataLoader worker (pid N) is killed by signal: Bus
# error. It is possible that dataloader's workers are out of shared memory. ...", "DataLoader
# worker (pid(s) N, M) exited unexpectedly", the worker's own "ERROR: Unexpected bus error
# encountered in worker. This might be caused by insufficient shared memory (shm).", an exception
# the worker raised and the main process re-raised ("FileNotFoundError: Caught FileNotFoundError
# in DataLoader worker process 0.", torch/_utils.py ExceptionWrapper) and "DataLoader timed out
# after N seconds". A job that completed no iteration and printed one failed reading its first
# batches: its failure stage is data_loading, whatever marker came last ("***** Running training
# *****" is printed before the first batch is read; ``jobs.job_failure_points``).
#
# Session 58: also a traceback frame of the code that reads the dataset: HF datasets' load.py,
# arrow_dataset.py, builder.py, arrow_reader.py and table.py (``load_dataset``, ``load_from_disk``,
# ``Dataset.map`` over a cached file), Megatron-LM's megatron/core/datasets (``BlendedMegatronDatasetBuilder
# .build``, ``_build_megatron_dataset_splits``, the indexed dataset's reader), and any function named
# for loading, building or reading a dataset (``build_train_valid_test_datasets``, a training
# script's own ``load_tokenized_dataset``; Megatron's ``build_train_valid_test_data_iterators`` and
# ``train_valid_test_datasets_provider``).
DEFAULT_DATA_FAILURE_RULES: tuple[str, ...] = (
    r"DataLoader worker \(pid[^)]*\) (?:is killed by signal|exited unexpectedly)",
    r"Unexpected (?:bus error|segmentation fault|floating-point exception) encountered in worker",
    r"Caught \w+ in DataLoader worker process [0-9]+",
    r"DataLoader timed out after [0-9]+ seconds",
    r'File "[^"]*", line [0-9]+, in \w*(?:(?:load|build|prepare|read|open|get|make|create)_\w*'
    r'(?:datasets?|data_iterators?|data_?loaders?)|datasets?_provider)\w*\b',
    r'File "[^"]*/datasets/(?:load|arrow_dataset|builder|arrow_reader|table)\.py", line [0-9]+, in ',
    r'File "[^"]*megatron/core/datasets/[^"]*", line [0-9]+, in ',
)


# Session 58: traceback frames of a framework's checkpoint save, each function where it lives:
# Megatron-LM / MindSpeed-LLM / Megatron-DeepSpeed training.py ``save_checkpoint_and_time`` and
# checkpointing.py ``save_checkpoint``; DeepSpeed runtime/engine.py ``save_checkpoint``,
# ``_save_checkpoint``, ``_save_zero_checkpoint``; transformers trainer.py ``_save_checkpoint``,
# ``_save_optimizer_and_scheduler``; accelerate utils/fsdp_utils.py ``save_fsdp_model``,
# ``save_fsdp_optimizer``; torch.distributed.checkpoint state_dict_saver.py ``save``,
# ``save_state_dict``, ``_save_state_dict`` and filesystem.py ``write_data``,
# ``_write_files_from_queue``; torchtitan's checkpoint.py ``CheckpointManager.save``. A job whose
# failing process raised through one of them failed saving a checkpoint, whatever its last marker
# says (HF Trainer's and torchtitan's progress line of the step may follow the save's first line;
# torchtitan's save names no step). Loading frames (``load_checkpoint``, ``state_dict_loader.py``,
# ``read_data``) are not saves, and ``torch.save`` alone is not one (a dataset cache is written
# with it too). ``jobs.job_failure_points``.
DEFAULT_SAVE_FAILURE_RULES: tuple[str, ...] = (
    r'File "[^"]*", line [0-9]+, in (?:save_checkpoint|save_checkpoint_and_time|_save_checkpoint'
    r'|_save_zero_checkpoint|_save_optimizer_and_scheduler|save_fsdp_model|save_fsdp_optimizer)\b',
    r'File "[^"]*torch/distributed/checkpoint/(?:state_dict_saver\.py", line [0-9]+, in (?:save|save_state_dict'
    r'|_save_state_dict)|filesystem\.py", line [0-9]+, in (?:write_data|_write_files_from_queue))\b',
    r'File "[^"]*torchtitan/[^"]*checkpoint\.py", line [0-9]+, in save\b',
)


@dataclass(frozen=True)
class TemporalConfig:
    stage_rules: tuple[StageRule, ...] = DEFAULT_STAGE_RULES
    iteration_rules: tuple[IterationRule, ...] = DEFAULT_ITERATION_RULES
    counted_iteration_rules: tuple[CountedIterationRule, ...] = DEFAULT_COUNTED_ITERATION_RULES
    elapsed_rules: tuple[str, ...] = DEFAULT_ELAPSED_RULES
    bad_count_rules: tuple[str, ...] = DEFAULT_BAD_COUNT_RULES
    nonfinite_rules: tuple[str, ...] = DEFAULT_NONFINITE_RULES
    progress_clock_rules: tuple[str, ...] = DEFAULT_PROGRESS_CLOCK_RULES
    pace_rules: tuple[str, ...] = DEFAULT_PACE_RULES  # session 41; [] : slowdowns paced by time stamps alone
    data_failure_rules: tuple[str, ...] = DEFAULT_DATA_FAILURE_RULES  # session 57; [] : by the last marker alone
    save_failure_rules: tuple[str, ...] = DEFAULT_SAVE_FAILURE_RULES  # session 58; [] : by the last marker alone
    window: int = 10  # previous iterations each iteration is compared with
    sigma: float = 3.0  # anomalous: score < mean - sigma * std
    min_reference: int = 2  # reference iterations an iteration needs before the three-sigma rule judges it
    min_drop: float = 0.05  # and at least this far below the mean (std ~ 0 on clean jobs)
    max_sequence: int = 256  # events kept per iteration (after collapsing repeats)
    max_iterations: int = 2000  # last iterations of a job compared (earlier ones are skipped)
    max_ranks: int = 64  # ranks whose lines build the sequences (all marker ranks + a sample)
    hang_factor: float = 5.0  # stall: job's last line later than this x iteration time after last progress
    slowdown_factor: float = 1.2  # slowdown: iteration time above this x the baseline until the end (a straggler: 1.2-1.7x)
    slowdown_min_intervals: int = 2
    slowdown_min_span_s: float = 20.0  # ...read over progress spans this long at least (stamps to the second: +-5%)
    slowdown_band: float = 1.1  # the slowdown began where iteration time first rose above this x the baseline
    recovery_intervals: int = 3  # an anomaly the job ran this many normal logged intervals past is not a failure
    # a lasting change (NaN, every step skipped) placed inside its logged interval as the stop is: by the
    # time of its first new non-progress line over the pace, else the interval's middle (not its first iteration)
    changed_placed_in_interval: bool = True
    # the open interval (last progress line -> the job's last line, not stalled) counts as one more interval,
    # at least (its length / stride) per iteration: a slowdown the job was cancelled in is seen after one slow interval
    slowdown_open_interval: bool = True
    # progress lines without a timestamp (HF Trainer's log dicts) are paced by the timed checkpoint saves
    # that name their step (`Saving model checkpoint to .../checkpoint-N` is printed when step N is done):
    # the stop is placed by the time from the last such save to the first new error over that pace
    pace_from_saves: bool = True
    # Session 47: a checkpoint save begun after the last progress line is not training time. The stop is
    # placed by the time from that line to the first error less the save's typical length: the excess
    # over the pace of the earlier logged intervals that held a save (Megatron stops its iteration timer
    # around the save; a MindSpeed save of 134 s put a job 2 iterations late). False: the save counts
    # as training (sessions 46 and before)
    save_out_of_pace: bool = True
    # Session 49: after an anomalous iteration, a logged interval that held a checkpoint save is no
    # slower training (``dtw.aftermath``): a loss turned NaN for good whose next intervals held a
    # routine save (2.0x the pace) was judged ``slower``, not a lasting change, and never placed
    # (fresh 36097's MindSpeed loss_nan: 2589 for 2288). False: the save's interval is paced
    # (sessions 48 and before)
    saves_unpaced_after: bool = True
    # Session 51: the progress lines' times are read on the job's reference clock (the clock-corrected
    # ``t_job``), as the first error's are. Megatron-DeepSpeed prints its undated progress line on the
    # last rank (the reference node) and DeepSpeed's dated ``step=N`` line on rank 0, another node: its
    # own clock, 6.9 s ahead there, put the stop 4 iterations early (fresh 36119's ib_completion_error,
    # 2033 for 2037). False: the progress lines' own clocks (sessions 50 and before)
    progress_on_job_clock: bool = True
    # Session 51: a training line without a timestamp that states its time in its text (the diagnosis
    # passes ``spatial.stated_time_patterns``: Slurm's ``*** STEP ... CANCELLED AT <time> ***``,
    # torchrun's failure summary ``time : <time>``) dates when the job broke, as a timed error line
    # does. An srun job whose ranks print undated lines had no time after its last progress line but
    # Slurm's cancel notice, and went to the interval's middle (fresh 36119's host_oom_kill: 735 for
    # 739). False: such lines are untimed here (sessions 50 and before)
    stated_times_date_stops: bool = True
    # Session 51: an interval whose new events include a progress line printing a value as not a number
    # (``nonfinite_rules``) is followed for a lasting change (``aftermath``) even when its score is not
    # ``min_drop`` below the job's mean. Megatron-DeepSpeed drops a NaN loss from the line and prints
    # ``grad norm: nan``; that one line moved the interval's score 0.92 -> 0.81, not below the mean of
    # a job whose scores spread widely (three-sigma line 0.31; fresh 36131's loss_nan: placed where the
    # job ended, 13494, for 13146). False: such an interval needs the drop (sessions 50 and before)
    nonfinite_progress_followed: bool = True
    # Session 51: when the last progress lines have no timestamp but earlier ones do (Megatron-DeepSpeed
    # dates only DeepSpeed's ``step=N`` line, every ``steps_per_print`` steps, up to 100), the first
    # error places the stop by the pace from the last timed progress line, within the interval after
    # the last progress line, when it came after that line was due by the pace and less than an
    # interval and an iteration later. Fresh 36137: a fallen-off-the-bus GPU 80 steps after the last
    # timed line (2485 for 2488) and a dataloader bus error (5815 for 5818) had gone to the interval's
    # middle. False: the middle (sessions 50 and before)
    pace_from_earlier_marks: bool = True
    # Session 58: when the last progress line has no time, the job's last timed checkpoint save is an
    # anchor even when earlier progress lines are timed; the later of the two places the stop (a save's
    # lines end after the step line that names it, and its length is not training time). Fresh 36183:
    # Megatron-DeepSpeed's dated ``step=3200`` line, then the save of step 3200 (108 s, 2.4 steps):
    # a NIC down at 3242 was placed at 3244. False: the last timed progress line, the save counted as
    # training (sessions 57 and before)
    saves_after_timed_marks: bool = True
    # Session 58: untimed progress bars with an elapsed clock (HF Trainer's tqdm) are put on the job's clock
    # from the time of the last timed stage marker before the first bar (``***** Running training *****``;
    # the Trainer creates its bar right after), when every timed line of that rank after it lies between its
    # neighbouring bars within ``bar_clock_tolerance_s``: the first error then places the stop inside the
    # interval after the last bar. Third blind generator 911: an ECC error at step 500 after bar 475 (bars
    # every 25 steps) was placed at the interval's middle, 488. False: such bars pace only (sessions 57 and
    # before)
    bar_clock_from_training_start: bool = True
    bar_clock_tolerance_s: float = 10.0
    # Session 40: when the first error after the last progress line came before one iteration past the
    # next progress line's due time, it places the stop even in a stalled job (a process that died at
    # once, its peers waiting in the collective until HCCL's timeout). False: a stalled job's first
    # error never places it (sessions 39 and before)
    early_error_places_stall: bool = True
    # Session 40, measured and left off: a first error later than that places nothing, stalled or not (a
    # timeout's error tells nothing of when the job stopped): the interval's middle. On five fresh fleets it
    # moved four hangs, one hit won and two lost (docs/temporal.md, "Session 40"). False: a job not stalled
    # by hang_factor is placed by its late error, at most at the interval's end
    late_error_mid_interval: bool = False
    rare_max_jobs: int = 1  # stand-in indicating events: in at most this many jobs of the warehouse

    def __post_init__(self) -> None:
        for rule in self.stage_rules:
            if rule.stage not in STAGES:
                raise ValueError(f"temporal.stage_rules: stage {rule.stage!r} is not one of {STAGES}")
            if rule.names_iteration and "(" not in rule.pattern.replace(r"\(", ""):
                raise ValueError(f"temporal.stage_rules: {rule.pattern!r} names an iteration but has no group 1")
        if self.recovery_intervals < 1:
            raise ValueError(f"temporal.recovery_intervals must be >= 1, got {self.recovery_intervals}")
        if self.slowdown_min_span_s < 0:
            raise ValueError(f"temporal.slowdown_min_span_s must be >= 0, got {self.slowdown_min_span_s}")
        if self.window < 1:
            raise ValueError(f"temporal.window must be >= 1, got {self.window}")
        for key, regex in self.regexes():
            try:
                check_regex(regex)
            except UnsafeRegexError as exc:
                raise ValueError(f"{key}: {exc}") from exc

    def regexes(self) -> list[tuple[str, str]]:
        """(config key, regex) of every rule; each is searched in messages by the JVM."""
        out = [(f"temporal.stage_rules[{i}].pattern", r.pattern) for i, r in enumerate(self.stage_rules)]
        out += [(f"temporal.iteration_rules[{i}].pattern", r.pattern) for i, r in enumerate(self.iteration_rules)]
        out += [(f"temporal.elapsed_rules[{i}]", r) for i, r in enumerate(self.elapsed_rules)]
        out += [(f"temporal.bad_count_rules[{i}]", r) for i, r in enumerate(self.bad_count_rules)]
        out += [(f"temporal.nonfinite_rules[{i}]", r) for i, r in enumerate(self.nonfinite_rules)]
        out += [(f"temporal.progress_clock_rules[{i}]", r) for i, r in enumerate(self.progress_clock_rules)]
        out += [(f"temporal.pace_rules[{i}]", r) for i, r in enumerate(self.pace_rules)]
        out += [(f"temporal.data_failure_rules[{i}]", r) for i, r in enumerate(self.data_failure_rules)]
        out += [(f"temporal.save_failure_rules[{i}]", r) for i, r in enumerate(self.save_failure_rules)]
        for i, rule in enumerate(self.counted_iteration_rules):
            out += [(f"temporal.counted_iteration_rules[{i}].{name}", getattr(rule, name))
                    for name in ("pattern", "interval_pattern", "start_pattern") if getattr(rule, name)]
        return out
