"""Failure stage and iteration of data-loading and checkpoint-save failures, per framework family.

Each job is a small two-node log written the way the real framework writes it (the lines and
where they were seen are in ``l4spark/temporal/config.py``'s stage rules): rank 0 on node a
narrates, a rank on node b hits the storage error. A checkpoint save's failure iteration is the
iteration the save names.
"""

from __future__ import annotations

import datetime as dt
import re

import pytest

from l4spark.temporal.jobs import analyse_iterations, job_failure_points
from l4spark.temporal.lines import with_stage_and_iteration

SCHEMA = ("job_id string, node string, rank int, file string, line_no long, ts timestamp, level string, "
          "event_id string, message string, stage string, iteration long")

# (node, rank, seconds or None for an untimed line, level, message)
Line = tuple[str, int, "float | None", "str | None", str]


def _ts(seconds: float | None) -> dt.datetime | None:
    return None if seconds is None else dt.datetime(2026, 11, 2, 12, 0, 0) + dt.timedelta(seconds=seconds)


def _rows(job_id: str, lines: list[Line]) -> list[tuple]:
    """Event rows of one job; the event id is the message with its numbers masked."""
    line_no: dict[int, int] = {}
    rows = []
    for node, rank, t, level, message in lines:
        line_no[rank] = line_no.get(rank, 0) + 1
        event = "E:" + re.sub(r"\d+", "<n>", message)
        rows.append((job_id, node, rank, f"{job_id}/{node}/rank-{rank}.log", line_no[rank], _ts(t), level, event,
                     message, None, None))
    return rows


def _megatron_setup(last_rank: int) -> list[Line]:
    return [("a", 0, None, None, "using world size: 2, data-parallel size: 2, tensor-model-parallel size: 1"),
            ("a", 0, None, None, "> initializing torch distributed ..."),
            ("a", 0, None, None, "building GPT model ..."),
            ("b", last_rank, None, None, " > number of parameters on (tensor, pipeline) model parallel rank (0, 0): 8030261248"),
            ("a", 0, None, None, "    will not load any checkpoints and will start from random"),
            ("a", 0, None, None, "> building train, validation, and test datasets ..."),
            ("a", 0, None, None, "> building train, validation, and test datasets for GPT ...")]


def _megatron_training(last_rank: int, upto: int, saves: tuple[int, ...], old_format: bool = False) -> list[Line]:
    """Iteration lines every 10 (on the last rank) and completed saves (on rank 0), 10 s each."""
    lines: list[Line] = [("a", 0, None, None, "> finished creating GPT datasets ..."),
                         ("a", 0, None, None, "training ..."),
                         ("a", 0, 5, None, "[before the start of training step] datetime: 2026-11-02 12:00:05 ")]
    for it in range(10, upto + 1, 10):
        lines.append(("b", last_rank, 10.0 * it, None,
                      f" iteration {it:8d}/    1000 | consumed samples: {it * 8:12d} | lm loss: 2.1E+00 |"))
        if it in saves:
            done = (f"  successfully saved checkpoint at iteration {it:7d} to /ckpt" if old_format else
                    f"  successfully saved checkpoint from iteration {it:7d} to /ckpt [ t 1/1, p 1/1 ]")
            lines += [("a", 0, None, None, f"saving checkpoint at iteration {it:7d} to /ckpt in torch_dist format"),
                      ("a", 0, None, None, done)]
    return lines


def _stale_cache_traceback(node: str, rank: int, t: float, path: str) -> list[Line]:
    return [(node, rank, None, None, "Traceback (most recent call last):"),
            (node, rank, None, None, f"OSError: [Errno 116] Stale file handle: '{path}'"),
            ("a", 0, t, "ERROR", "failed (exitcode: 1) local_rank: 1 (pid: 4242) of binary: /usr/bin/python3")]


def _watchdog(t: float) -> Line:
    return ("a", 0, t, "ERROR", "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2410, "
                                "OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600045 milliseconds before timing out.")


def megatron_data() -> list[Line]:
    # a stale NFS handle while memory-mapping the cached GPTDataset index (rank 1, node b)
    return _megatron_setup(1) + _stale_cache_traceback(
        "b", 1, 40, "/data/cache/4f1a-GPTDataset-train-document_index.npy")


def megatron_save() -> list[Line]:
    return (_megatron_setup(1) + _megatron_training(1, 60, saves=(30,))
            + [("a", 0, None, None, "saving checkpoint at iteration      60 to /ckpt in torch_dist format"),
               ("b", 1, None, None, "OSError: [Errno 122] Disk quota exceeded: '/ckpt/iter_0000060/__1_0.distcp'"),
               _watchdog(1250)])


def megatron_save_skewed() -> list[Line]:
    # rank 0's lines are timed (a container runtime's timestamps); the last rank's node clock is 2 s
    # ahead, so iteration 60's line sorts after the save of iteration 60 that followed it
    lines = [(node, rank, None if t is None else t, level, message)
             for node, rank, t, level, message in _megatron_setup(1) + _megatron_training(1, 60, saves=(30,))]
    lines = [(n, r, (t + 2 if n == "b" and t is not None else t), lv, m) for n, r, t, lv, m in lines]
    return lines + [("a", 0, 600.3, None, "saving checkpoint at iteration      60 to /ckpt in torch_dist format"),
                    ("b", 1, None, None, "OSError: [Errno 116] Stale file handle: '/ckpt/iter_0000060/__1_0.distcp'"),
                    _watchdog(1250)]


def megatron_deepspeed_data() -> list[Line]:
    # Megatron-DeepSpeed's indexed dataset reader on a shared file system
    return (_megatron_setup(1) + [("a", 0, None, None, " > building dataset index ..."),
                                  ("a", 0, None, None, "    reading sizes...")]
            + _stale_cache_traceback("b", 1, 40, "/data/oscar_text_document.bin"))


def megatron_deepspeed_save() -> list[Line]:
    # Megatron-DeepSpeed saves through DeepSpeed's engine; rank 0 wrote its shard and waits in the
    # barrier while rank 1's shard hits a stale handle
    tag = "/ckpt/global_step40"
    return (_megatron_setup(1) + _megatron_training(1, 40, saves=(20,), old_format=True)
            + [("a", 0, None, None, "saving checkpoint at iteration      40 to /ckpt"),
               ("a", 0, 401, "INFO", "[Rank 0] [Torch] Checkpoint global_step40 is about to be saved!"),
               ("a", 0, 401, "INFO", f"[Rank 0] Saving model checkpoint: {tag}/mp_rank_00_model_states.pt"),
               ("a", 0, 402, "INFO", f"[Torch] Saving {tag}/zero_pp_rank_0_mp_rank_00_optim_states.pt..."),
               ("b", 1, 402, "INFO", f"[Torch] Saving {tag}/zero_pp_rank_1_mp_rank_00_optim_states.pt..."),
               ("a", 0, 420, "INFO", f"[Torch] Saved {tag}/zero_pp_rank_0_mp_rank_00_optim_states.pt."),
               ("a", 0, 420, "INFO", f"zero checkpoint saved {tag}/zero_pp_rank_0_mp_rank_00_optim_states.pt"),
               ("b", 1, None, None, f"OSError: [Errno 116] Stale file handle: '{tag}/zero_pp_rank_1_mp_rank_00_optim_states.pt'"),
               _watchdog(1030)])


def _deepspeed_setup() -> list[Line]:
    return [("a", 0, 0, "INFO", "Setting ds_accelerator to cuda (auto detect)"),
            ("a", 0, 1, "INFO", "Initializing TorchBackend in DeepSpeed with backend nccl"),
            ("b", 1, 1, "INFO", "Setting ds_accelerator to cuda (auto detect)")]


def deepspeed_data() -> list[Line]:
    # a DeepSpeed script reading its tokenized dataset from the HF datasets cache on NFS
    cache = "/nfs/hf_cache/json/default-8a2f/0.0.0/c1d2"
    return (_deepspeed_setup()
            + [("a", 0, 3, "INFO", f"Found cached dataset json ({cache})"),
               ("a", 0, 4, "INFO", f"Loading cached processed dataset at {cache}/cache-5e1f.arrow"),
               ("b", 1, 4, "INFO", f"Loading cached processed dataset at {cache}/cache-5e1f.arrow")]
            + _stale_cache_traceback("b", 1, 9, f"{cache}/cache-5e1f.arrow"))


def deepspeed_save() -> list[Line]:
    tag = "/ckpt/global_step100"
    lines = _deepspeed_setup() + [("a", 0, 20, "INFO", "[Rank 0] DeepSpeed info: version=0.14.4, git-hash=unknown")]
    for it in range(10, 101, 10):
        lines.append(("a", 0, 30 + 10.0 * it, "INFO", f"[Rank 0] step={it}, skipped=0, lr=[1e-05], mom=[(0.9, 0.95)]"))
    return lines + [
        ("a", 0, 1031, "INFO", "[Rank 0] [Torch] Checkpoint global_step100 is about to be saved!"),
        ("a", 0, 1031, "INFO", f"[Rank 0] Saving model checkpoint: {tag}/mp_rank_00_model_states.pt"),
        ("a", 0, 1032, "INFO", f"[Torch] Saving {tag}/zero_pp_rank_0_mp_rank_00_optim_states.pt..."),
        ("a", 0, 1050, "INFO", f"zero checkpoint saved {tag}/zero_pp_rank_0_mp_rank_00_optim_states.pt"),
        ("b", 1, 1032, "INFO", f"[Torch] Saving {tag}/zero_pp_rank_1_mp_rank_00_optim_states.pt..."),
        ("b", 1, None, None, f"OSError: [Errno 122] Disk quota exceeded: '{tag}/zero_pp_rank_1_mp_rank_00_optim_states.pt'"),
        _watchdog(1640)]


def _hf_setup() -> list[Line]:
    return [("a", 0, 0, "INFO", "Training/evaluation parameters TrainingArguments("),
            ("a", 0, None, None, "logging_steps=10,"),
            ("a", 0, 2, "INFO", "loading configuration file /models/llama3-8b/config.json"),
            ("a", 0, None, None, "Loading checkpoint shards: 100%|##########| 4/4 [00:09<00:00,  2.31s/it]")]


def hf_data() -> list[Line]:
    # run_clm.py tokenizes after loading the model; the cached map output sits on NFS
    cache = "/nfs/hf_cache/text/default-77aa/0.0.0/9f3e"
    return (_hf_setup()
            + [("a", 0, 15, "INFO", f"Loading cached processed dataset at {cache}/cache-0c4d.arrow"),
               ("b", 1, 15, "INFO", f"Loading cached processed dataset at {cache}/cache-0c4d.arrow")]
            + _stale_cache_traceback("b", 1, 18, f"{cache}/cache-0c4d.arrow"))


def hf_save() -> list[Line]:
    # transformers 4.36: save to tmp-checkpoint-N, rename at the end; on a shared file system
    # another node's rank renamed it first (huggingface/transformers#27925)
    out = "/out/tmp-checkpoint-50"
    lines = _hf_setup() + [("a", 0, 20, "INFO", "***** Running training *****")]
    for k in range(1, 6):
        lines.append(("a", 0, None, None, "{'loss': 1.52, 'grad_norm': 0.31, 'learning_rate': 1e-05, 'epoch': 0.1}"))
    return lines + [
        ("a", 0, 530, "INFO", f"Saving model checkpoint to {out}"),
        ("a", 0, 531, "INFO", f"Configuration saved in {out}/config.json"),
        ("a", 0, 560, "INFO", f"tokenizer config file saved in {out}/tokenizer_config.json"),
        ("a", 0, 560, "INFO", f"Special tokens file saved in {out}/special_tokens_map.json"),
        ("a", 0, None, None, "Traceback (most recent call last):"),
        ("a", 0, None, None, f"FileNotFoundError: [Errno 2] No such file or directory: '{out}' -> '/out/checkpoint-50'"),
        ("a", 0, 575, "ERROR", "failed (exitcode: 1) local_rank: 0 (pid: 4100) of binary: /usr/bin/python3")]


def mindspeed_data() -> list[Line]:
    return _megatron_setup(1) + _stale_cache_traceback("b", 1, 40, "/data/alpaca/alpaca_packed_input_ids_document.idx")


def mindspeed_save() -> list[Line]:
    return (_megatron_setup(1) + _megatron_training(1, 80, saves=(40,))
            + [("a", 0, None, None, "saving checkpoint at iteration      80 to /ckpt in torch_dist format"),
               ("b", 1, None, None, "OSError: [Errno 116] Stale file handle: '/ckpt/iter_0000080/__1_0.distcp'"),
               ("a", 0, 2700, "ERROR", "RuntimeError: ACL stream synchronize failed, error code:507048")])


def _titan_setup() -> list[Line]:
    # torchtitan train.py / datasets/hf_datasets.py / components/checkpoint.py, in their order:
    # the dataset is prepared before the model is built
    return [("a", 0, 0, "INFO", "Starting job: Llama 3 8B training"),
            ("a", 0, 2, "INFO", "Preparing c4 dataset from allenai/c4"),
            ("b", 1, 2, "INFO", "Preparing c4 dataset from allenai/c4"),
            ("a", 0, 6, "INFO", "Building llama3 8B with TransformerModelArgs(_enforced='This field is used to "
                                "enforce all fields have defaults.', dim=4096, n_layers=32, n_heads=32)")]


def _titan_training(upto: int, saves: tuple[int, ...], colour: bool = False, save_at_end: bool = False) -> list[Line]:
    """Progress lines every 10 steps (10 s a step) on both ranks, completed saves on both."""
    red, green, reset = ("\x1b[31m", "\x1b[32m", "\x1b[39m") if colour else ("", "", "")
    lines: list[Line] = [("a", 0, 40, "INFO", "Training starts at step 1.")]
    for step in range(10, upto + 1, 10):
        for node, rank in (("a", 0), ("b", 1)):
            lines.append((node, rank, 40 + 10.0 * step, "INFO",
                          f"{red}step: {step:2}  {green}loss: {9.0 - step / 100:7.4f}  grad_norm:  0.4411  "
                          f"memory: 38.80GiB(48.49%)  tps: 8,014  tflops: 193.06  mfu: 19.52%{reset}"))
        if step in saves or (save_at_end and step == upto):
            for node, rank in (("a", 0), ("b", 1)):
                lines.append((node, rank, 41 + 10.0 * step, "INFO", "Saving the checkpoint (or staging if async is enabled)."))
                if step in saves:
                    lines.append((node, rank, 44 + 10.0 * step, "INFO",
                                  "Finished saving the checkpoint (or staging if async is enabled)in 3.02 seconds."))
    return lines


def titan_data() -> list[Line]:
    return _titan_setup()[:3] + _stale_cache_traceback("b", 1, 5, "/data/c4/en/c4-train.00017-of-01024.json.gz")


def titan_save() -> list[Line]:
    return (_titan_setup() + _titan_training(100, saves=(50,), save_at_end=True)
            + [("b", 1, None, None, "OSError: [Errno 116] Stale file handle: '/ckpt/step-100/__1_0.distcp'"),
               ("a", 0, 1100, "ERROR", "failed (exitcode: 1) local_rank: 1 (pid: 4242) of binary: /usr/bin/python3")])


def titan_train() -> list[Line]:
    # torchtitan's colours left in the log (its default); a rank runs out of memory in step 64
    return (_titan_setup() + _titan_training(60, saves=(50,), colour=True)
            + [("b", 1, 675, None, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 "
                                   "has a total capacity of 79.10 GiB of which 1.20 GiB is free."),
               ("a", 0, 690, "ERROR", "failed (exitcode: 1) local_rank: 1 (pid: 4242) of binary: /usr/bin/python3")])


def _bus_error(node: str, rank: int, t: float) -> list[Line]:
    # a DataLoader worker dies of SIGBUS on a small /dev/shm (torch/csrc/DataLoader.cpp, then the
    # main process's _error_if_any_worker_fails, torch/utils/data/_utils/signal_handling.py)
    return [(node, rank, None, None, "ERROR: Unexpected bus error encountered in worker. This might be caused by "
                                     "insufficient shared memory (shm)."),
            (node, rank, None, None, "Traceback (most recent call last):"),
            (node, rank, None, None, "RuntimeError: DataLoader worker (pid 13886) is killed by signal: Bus error. It is "
                                     "possible that dataloader's workers are out of shared memory. Please try to raise "
                                     "your shared memory limit."),
            ("a", 0, t, "ERROR", f"failed (exitcode: 1) local_rank: {rank} (pid: 4242) of binary: /usr/bin/python3")]


def hf_first_batch() -> list[Line]:
    # the Trainer announces the training loop, then its first batch is never read
    return _hf_setup() + [("a", 0, 20, "INFO", "***** Running training *****")] + _bus_error("b", 1, 31)


def megatron_first_batch() -> list[Line]:
    return (_megatron_setup(1) + [("a", 0, None, None, "> finished creating GPT datasets ..."),
                                  ("a", 0, None, None, "training ..."),
                                  ("a", 0, 5, None, "[before the start of training step] datetime: 2026-11-02 12:00:05 ")]
            + _bus_error("b", 1, 9))


def megatron_later_batch() -> list[Line]:
    # the same worker's death after 40 iterations: the job was training
    return _megatron_setup(1) + _megatron_training(1, 40, saves=()) + _bus_error("b", 1, 405)


def _save_traceback(node: str, rank: int, frames: list[tuple[str, str]], error: str) -> list[Line]:
    lines: list[Line] = [(node, rank, None, None, "Traceback (most recent call last):")]
    for path, function in frames:
        lines.append((node, rank, None, None, f'  File "{path}", line 322, in {function}'))
    return lines + [(node, rank, None, None, error)]


def hf_save_bar_after() -> list[Line]:
    # tqdm bars every step (10 s), saves every 25 steps, the bar of step 50 printed after the
    # save's first line; a rank of node b raises through the Trainer's FSDP save
    site = "/usr/local/lib/python3.10/dist-packages"
    out = "/lustre/ckpt/run9/checkpoint-50"
    lines = _hf_setup() + [("a", 0, 20, "INFO", "***** Running training *****")]
    for step in range(1, 51):
        if step % 25 == 0:
            lines.append(("a", 0, 20 + 10 * step, "INFO", f"Saving model checkpoint to /lustre/ckpt/run9/checkpoint-{step}"))
        lines.append(("a", 0, None, None, f" {step * 2}%|#         | {step}/50 [{step // 6:02d}:{step * 10 % 60:02d}<05:00, 10.00s/it]"))
        if step == 25:
            lines.append(("a", 0, 20 + 10 * step + 5, "INFO", "Special tokens file saved in "
                                                               "/lustre/ckpt/run9/checkpoint-25/special_tokens_map.json"))
    lines.append(("a", 0, 521, "INFO", f"Configuration saved in {out}/config.json"))
    return lines + _save_traceback("b", 1, [
        (f"{site}/transformers/trainer.py", "_save_checkpoint"),
        (f"{site}/transformers/trainer.py", "_save_optimizer_and_scheduler"),
        (f"{site}/accelerate/utils/fsdp_utils.py", "save_fsdp_optimizer"),
        (f"{site}/torch/distributed/checkpoint/filesystem.py", "_write_files_from_queue")],
        f"OSError: [Errno 116] Stale file handle: '{out}/pytorch_model_fsdp_0/__1_0.distcp'") + [
        ("a", 0, 560, "ERROR", "failed (exitcode: 1) local_rank: 1 (pid: 4242) of binary: /usr/bin/python3")]


def titan_save_step_after() -> list[Line]:
    # the save's first line printed before the progress line of the step it saves (torchtitan
    # prints the step's metrics first; a log may interleave them the other way)
    lines = _titan_setup() + _titan_training(90, saves=(50,))
    lines += [("a", 0, 1041, "INFO", "Saving the checkpoint (or staging if async is enabled)."),
              ("a", 0, 1041.5, "INFO", "step: 100  loss:  8.0000  grad_norm:  0.4411  memory: 38.80GiB(48.49%)  tps: 8,014")]
    site = "/opt/conda/lib/python3.11/site-packages"
    return lines + _save_traceback("b", 1, [
        ("/workspace/torchtitan/torchtitan/train.py", "train"),
        ("/workspace/torchtitan/torchtitan/components/checkpoint.py", "save"),
        (f"{site}/torch/distributed/checkpoint/state_dict_saver.py", "save"),
        (f"{site}/torch/distributed/checkpoint/filesystem.py", "_write_files_from_queue")],
        "OSError: [Errno 116] Stale file handle: '/ckpt/step-100/__1_0.distcp'") + [
        ("a", 0, 1100, "ERROR", "failed (exitcode: 1) local_rank: 1 (pid: 4242) of binary: /usr/bin/python3")]


def deepspeed_own_reader() -> list[Line]:
    # a training script's own reader (np.load of tokenized shards) after resuming the model from a
    # DeepSpeed checkpoint: the last marker is the checkpoint load
    return (_deepspeed_setup()
            + [("a", 0, 3, "INFO", "[Torch] Loading checkpoint from /nfs/ckpt/run4/global_step1000/mp_rank_00_model_states.pt"),
               ("a", 0, 40, "INFO", "successfully read 16 ZeRO state_dicts for rank 0"),
               ("a", 0, 42, None, "Loading tokenized dataset from /nfs/data/c4_en")]
            + _save_traceback("b", 1, [("/workspace/ds-train/train.py", "main"),
                                       ("/workspace/ds-train/train.py", "load_tokenized_dataset"),
                                       ("/opt/conda/lib/python3.10/site-packages/numpy/lib/npyio.py", "load")],
                              "OSError: [Errno 116] Stale file handle: '/nfs/data/c4_en/shard_00035.npy'")
            + [("a", 0, 60, "ERROR", "failed (exitcode: 1) local_rank: 1 (pid: 4242) of binary: /usr/bin/python3")])


def titan_save_error_survived() -> list[Line]:
    # a rank logs a save's traceback at step 50 (the save was retried and finished), then a rank
    # runs out of memory in step 64: the job broke training, not saving
    training = _titan_training(60, saves=(50,))
    at = next(i for i, line in enumerate(training) if line[1] == 1 and line[4].startswith("Finished saving"))
    retried = _save_traceback("b", 1, [("/workspace/torchtitan/torchtitan/components/checkpoint.py", "save"),
                                       ("/opt/conda/lib/python3.11/site-packages/torch/distributed/checkpoint/"
                                        "filesystem.py", "_write_files_from_queue")],
                              "OSError: [Errno 5] Input/output error: '/ckpt/step-50/__1_0.distcp'")
    return (_titan_setup() + training[:at] + retried + training[at:]
            + [("b", 1, 675, None, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."),
               ("a", 0, 690, "ERROR", "failed (exitcode: 1) local_rank: 1 (pid: 4242) of binary: /usr/bin/python3")])


def hf_dicts_save_error_survived() -> list[Line]:
    # HF Trainer without tqdm (a log dict every 10 steps, untimed): rank 0's callback catches and
    # logs a save's traceback at step 30, the dicts go on, a rank's kernel faults later (the
    # fixture's candidate events are the batch's rare ones: no other job here prints that line)
    site = "/usr/local/lib/python3.10/dist-packages"
    lines = _hf_setup() + [("a", 0, 20, "INFO", "***** Running training *****")]
    dict_line = "{'loss': 1.52, 'grad_norm': 0.31, 'learning_rate': 1e-05, 'epoch': 0.1}"
    lines += [("a", 0, None, None, dict_line)] * 3
    lines += [("a", 0, 320, "INFO", "Saving model checkpoint to /out/checkpoint-30")]
    lines += _save_traceback("a", 0, [(f"{site}/transformers/trainer.py", "_save_checkpoint"),
                                      (f"{site}/torch/serialization.py", "save")],
                             "OSError: [Errno 28] No space left on device")
    lines += [("a", 0, None, None, dict_line)] * 2
    return lines + [("b", 1, 560, None, "RuntimeError: CUDA error: an illegal memory access was encountered"),
                    ("a", 0, 575, "ERROR", "failed (exitcode: 1) local_rank: 1 (pid: 4242) of binary: /usr/bin/python3")]


JOBS = {  # job -> (lines, failure stage, failure iteration)
    "megatron_data": (megatron_data, "data_loading", None),
    "megatron_save": (megatron_save, "checkpoint_saving", 60),
    "megatron_save_skewed": (megatron_save_skewed, "checkpoint_saving", 60),
    "megatron_deepspeed_data": (megatron_deepspeed_data, "data_loading", None),
    "megatron_deepspeed_save": (megatron_deepspeed_save, "checkpoint_saving", 40),
    "deepspeed_data": (deepspeed_data, "data_loading", None),
    "deepspeed_save": (deepspeed_save, "checkpoint_saving", 100),
    "hf_trainer_data": (hf_data, "data_loading", None),
    "hf_trainer_save": (hf_save, "checkpoint_saving", 50),
    "mindspeed_data": (mindspeed_data, "data_loading", None),
    "mindspeed_save": (mindspeed_save, "checkpoint_saving", 80),
    "torchtitan_data": (titan_data, "data_loading", None),
    "torchtitan_save": (titan_save, "checkpoint_saving", 100),
    "torchtitan_train": (titan_train, "training", 64),
    # session 57: a DataLoader worker's death before the first iteration is a data_loading failure
    "hf_trainer_first_batch": (hf_first_batch, "data_loading", None),
    "megatron_first_batch": (megatron_first_batch, "data_loading", None),
    "megatron_later_batch": (megatron_later_batch, "training", 41),
    # session 58: a traceback through a checkpoint save is a checkpoint_saving failure, though a
    # progress line of the saved step came after the save's first line
    "hf_trainer_save_bar_after": (hf_save_bar_after, "checkpoint_saving", 50),
    "torchtitan_save_step_after": (titan_save_step_after, "checkpoint_saving", 100),
    # and a traceback through the code reading the dataset, before the first iteration, is data_loading
    "deepspeed_own_reader": (deepspeed_own_reader, "data_loading", None),
    # a save's traceback long before the job broke does not make it a save failure
    "torchtitan_save_error_survived": (titan_save_error_survived, "training", 64),
    # the same with counted progress lines (no step number) after the traceback
    "hf_trainer_dicts_save_error_survived": (hf_dicts_save_error_survived, "training", 55),
}


@pytest.fixture(scope="module")
def points(spark):
    """Per way of staging (the markers matched again, or carried by the staged lines as the
    diagnosis stages them), each job's (failure_stage, failure_iteration)."""
    rows = [row for job_id, (lines, _, _) in JOBS.items() for row in _rows(job_id, lines())]
    events = spark.createDataFrame(rows, SCHEMA)
    out = {}
    for with_marks in (False, True):
        staged = with_stage_and_iteration(events, with_marks=with_marks).localCheckpoint()
        _, progress = analyse_iterations(staged)
        out[with_marks] = {r.job_id: (r.failure_stage, r.failure_iteration)
                           for r in job_failure_points(staged, progress).collect()}
    return out


@pytest.mark.parametrize("job_id", sorted(JOBS))
@pytest.mark.parametrize("with_marks", [False, True], ids=["matched", "carried"])
def test_failure_stage_and_iteration(points, job_id, with_marks):
    _, stage, iteration = JOBS[job_id]
    assert points[with_marks][job_id] == (stage, iteration)
