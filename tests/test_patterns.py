"""The fault-pattern library: seeds load, matching on real messages, unsafe patterns refused."""

from __future__ import annotations

import pytest

from l4spark.diagnosis.patterns import FaultPattern, PatternError, match_patterns, seed_patterns

EVENTS = {
    "xid79": ("E1", "NVRM: Xid (PCI:<*>): <*>, pid=<*>, GPU has fallen off the bus.",
              "NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, GPU has fallen off the bus."),
    "watchdog": ("E2", "[Rank <*>] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=<*>, OpType=ALLREDUCE)",
                 "[Rank 12] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=88, OpType=ALLREDUCE)"),
    "oom": ("E3", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate <*> GiB.",
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."),
    "ib": ("E4", "NCCL WARN NET/IB : Got completion from peer <*> with error <*>, opcode <*>",
           "NCCL WARN NET/IB : Got completion from peer 10.3.1.17<52011> with error 12, opcode 0"),
    # NCCL 2.20 to 2.28 print "with status=N" (transport/net_ib.cc; the line as in NVIDIA/nccl#1814)
    "ib_status": ("E7", "NCCL WARN NET/IB : Got completion from peer <*> with status=<*> opcode=<*> len=<*> vendor err <*> (Recv)",
                  "NCCL WARN NET/IB : Got completion from peer 172.36.143.59<44206> with status=12 opcode=129 len=65536 "
                  "vendor err 129 (Recv) localGid ::ffff:29.87.88.182 remoteGids::ffff:29.87.4.221"),
    "nan": ("E5", "iteration <*>/ <*> | lm loss: nan | number of nan iterations: <*> |",
            "iteration 5/ 10 | lm loss: nan | number of nan iterations:   1 |"),
    "benign": ("E6", "saving checkpoint at iteration <*> to <*>", "saving checkpoint at iteration 100 to /ckpt"),
}


def test_seed_library_is_valid_and_covers_the_common_faults():
    seeds = {p.pattern_id: p for p in seed_patterns()}
    assert len(seeds) >= 10
    assert {"nccl-watchdog-timeout", "gpu-ecc-error", "gpu-fallen-off-bus", "nic-link-down", "ib-completion-error",
            "cuda-oom", "checkpoint-load-failure", "driver-toolkit-mismatch", "loss-nan"} <= set(seeds)
    assert all(p.remedy and p.root_cause for p in seeds.values())


@pytest.mark.parametrize("event,pattern_id", [
    ("xid79", "gpu-fallen-off-bus"), ("watchdog", "nccl-watchdog-timeout"), ("oom", "cuda-oom"),
    ("ib", "ib-completion-error"), ("ib_status", "ib-completion-error"), ("nan", "loss-nan"),
])
def test_each_fault_matches_its_pattern_first(event, pattern_id):
    matches = match_patterns(seed_patterns(), [EVENTS[event]])
    assert matches[0].pattern_id == pattern_id and matches[0].confidence == 1.0
    assert matches[0].matched_event_ids == (EVENTS[event][0],)


def test_benign_events_match_nothing():
    assert match_patterns(seed_patterns(), [EVENTS["benign"]]) == []


def test_partial_signature_gives_partial_confidence():
    pattern = FaultPattern("p1", "two-part", "network", "cause", "fix", ("Got completion from peer", "Watchdog caught"))
    only_one = match_patterns([pattern], [EVENTS["ib"]])
    both = match_patterns([pattern], [EVENTS["ib"], EVENTS["watchdog"]])
    assert [(m.confidence, m.missing) for m in only_one] == [(0.5, ("Watchdog caught",))]
    assert [(m.confidence, m.matched_event_ids) for m in both] == [(1.0, ("E4", "E2"))]
    assert match_patterns([pattern], [EVENTS["ib"]], min_confidence=0.6) == []


@pytest.mark.parametrize("signature,message", [
    ((), "signature is empty"),
    (("",), "empty"),
    (("([a-z",), "does not compile"),
    (("x*",), "matches the empty string"),
    (("(a+)+b",), "nests unbounded quantifiers"),
    (("(\\w*x)*y",), "nests unbounded quantifiers"),
    (("(?:.+)+",), "nests unbounded quantifiers"),
])
def test_unsafe_or_empty_signatures_are_refused(signature, message):
    with pytest.raises(PatternError, match=message):
        FaultPattern("p1", "n", "network", "cause", "fix", signature)


def test_bad_fields_are_refused():
    with pytest.raises(PatternError, match="pattern_id"):
        FaultPattern("../etc", "n", "network", "cause", "fix", ("x",))
    with pytest.raises(PatternError, match="remedy is empty"):
        FaultPattern("p1", "n", "network", "cause", " ", ("x",))
    with pytest.raises(PatternError, match="stage must be"):
        FaultPattern("p1", "n", "network", "cause", "fix", ("x",), stage="lunch")


@pytest.mark.spark
def test_added_pattern_is_stored_and_joins_the_library(spark, test_config):
    from l4spark.diagnosis.pattern_store import pattern_library, save_pattern

    custom = FaultPattern("site-fs-quota", "Project quota exceeded", "storage", "quota", "raise the quota",
                          ("Disk quota exceeded",), stage="checkpoint_saving", source_job_id="job-9")
    save_pattern(spark, test_config.storage, custom)
    library = {p.pattern_id: p for p in pattern_library(spark, test_config.storage)}
    assert library["site-fs-quota"] == custom and "cuda-oom" in library
    with pytest.raises(PatternError, match="already exists"):
        save_pattern(spark, test_config.storage, custom)
    # the built-in straggler fault's id is not for a table row (its signature reads the ranking)
    with pytest.raises(PatternError, match="reserved for the built-in straggler"):
        save_pattern(spark, test_config.storage, FaultPattern("straggler-unit", "s", "slowdown", "c", "r", ("slow",)))
    with pytest.raises(PatternError, match="reserved for the built-in hang"):
        save_pattern(spark, test_config.storage, FaultPattern("hang-unit", "h", "hang", "c", "r", ("behind",)))
    with pytest.raises(PatternError, match="reserved for the built-in hang while saving"):
        save_pattern(spark, test_config.storage, FaultPattern("save-outlasted-timeout-unit", "h", "configuration", "c",
                                                              "r", ("behind",)))
    with pytest.raises(PatternError, match="reserved for the built-in dead node"):
        save_pattern(spark, test_config.storage, FaultPattern("node-down-unit", "d", "node", "c", "r", ("silent",)))
    matches = match_patterns(library.values(), [("E9", "OSError: [Errno <*>] Disk quota exceeded: <*>",
                                                 "OSError: [Errno 122] Disk quota exceeded: '/ckpt/x'")])
    # the seed checkpoint-save-failure knows the quota too (session 24): both match, in full
    assert {(m.pattern_id, m.confidence) for m in matches} == {("site-fs-quota", 1.0), ("checkpoint-save-failure", 1.0)}


def test_cli_refuses_a_bad_regex_before_starting_spark(capsys):
    from l4spark.cli import main

    code = main(["patterns", "add", "--id", "p1", "--name", "n", "--fault-class", "network", "--root-cause", "c",
                 "--remedy", "r", "--signature", "(a+)+"])
    assert code == 2
    assert "nests unbounded quantifiers" in capsys.readouterr().err


# Lines as the sources quoted in fault_patterns.toml print them, and a near miss of each: a line a
# pattern must leave alone because it names another fault (or none)
NEW_FAULTS = [
    ("host-oom-kill",  # Linux mm/oom_kill.c __oom_kill_process
     "Out of memory: Killed process 85209 (python3) total-vm:358725656kB, anon-rss:105945635kB, file-rss:491640kB, "
     "shmem-rss:3606502kB, UID:0 pgtables:150218kB oom_score_adj:0",
     # a SIGKILL whose sender is not known, and the device's own OOM
     ("failed (exitcode: -9) local_rank: 3 (pid: 85209) of binary: /usr/bin/python3",
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.")),
    ("host-oom-kill",  # mm/oom_kill.c dump_header
     "python3 invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0, oom_score_adj=0",
     ("traceback : Signal 9 (SIGKILL) received by PID 394968",)),
    ("host-oom-kill",  # slurmstepd, task/cgroup before 22.05 (hafs-community/HAFS#101)
     "slurmstepd: error: Detected 1 oom-kill event(s) in step 3495064.0 cgroup. Some of your processes may have "
     "been killed by the cgroup out-of-memory handler.",
     # the same step's teardown, and another task's end
     ("slurmstepd: error: *** STEP 3495064.0 ON orion-01-01 CANCELLED AT 2021-10-27T19:35:36 ***",
      "srun: error: Orion-18-69: task 289: Bus error")),
    ("host-oom-kill",  # later releases (chrisknewman/tusas#149)
     "slurmstepd: error: Detected 2 oom_kill events in StepId=440575.0. Some of the step tasks have been OOM Killed.",
     # another node's teardown; srun's line on the launching node, about the OOM-killed node (in
     # the signature it would make the launching node the printer of a node-local fault)
     ("srun: error: nid001277: tasks 4-7: Killed", "srun: error: nid001277: tasks 1-3: Out Of Memory")),
    ("worker-sigkill",  # torch elastic (hpcaitech/ColossalAI#3514)
     "failed (exitcode: -9) local_rank: 3 (pid: 812917) of binary: /opt/conda/bin/python",
     # a worker that aborted, the survivors' teardown, a SIGTERM'd worker
     ("failed (exitcode: -6) local_rank: 0 (pid: 514946) of binary: /usr/bin/python3",
      "Sending process 812914 closing signal SIGTERM", "traceback : Signal 15 (SIGTERM) received by PID 394968")),
    ("worker-sigkill",  # torch elastic's failure summary
     "traceback : Signal 9 (SIGKILL) received by PID 394968", ()),
    ("worker-sigkill",  # DeepSpeed's launcher (deepspeedai/DeepSpeed#3232)
     "['/usr/bin/python3', '-u', 'main.py', '--local_rank=0'] exits with return code = -9",
     ("['/usr/bin/python3', '-u', 'main.py', '--local_rank=0'] exits with return code = -15",
      "['/usr/bin/python3', '-u', 'main.py', '--local_rank=0'] exits with return code = 1")),
    ("worker-sigkill",  # bash, for the process it started (ArjunaCluster/ArjunaUsers#52)
     "/var/spool/slurmd/job00191/slurm_script: line 28:  8156 Killed                  python3 main.py --prop hform",
     # srun's teardown and Open MPI's launcher, reporting for other nodes
     ("srun: error: nid001277: tasks 4-7: Killed",
      "mpirun noticed that process rank 10 with PID 0 on node yosibash-pc exited on signal 9 (Killed).")),
    ("dataloader-shm-bus-error",  # pytorch/pytorch#108861
     "RuntimeError: DataLoader worker (pid 11011) is killed by signal: Bus error. It is possible that dataloader's "
     "workers are out of shared memory. Please try to raise your shared memory limit.",
     ("RuntimeError: DataLoader worker (pid 11011) is killed by signal: Killed.",
      "RuntimeError: DataLoader worker (pid(s) 3216) exited unexpectedly")),
    ("dataloader-shm-bus-error",  # facebookresearch/mmf#441 (torch/csrc/DataLoader.cpp)
     "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).",
     ("Bus error (core dumped)",)),
    ("shared-fs-stale-handle",  # hiyouga/LlamaFactory#3388
     "OSError: [Errno 116] Stale file handle: '/home/xxx/.cache/huggingface/datasets/text/'",
     ("OSError: [Errno 16] Device or resource busy: '/home/xxx/.cache/huggingface/datasets/text/'",)),
    ("checkpoint-save-failure",  # open-mmlab/mmdetection#12069
     "OSError: [Errno 122] Disk quota exceeded: '/mnt/ckpt/llama2-13b/iter_0014000/__9_0.distcp'",
     ("OSError: [Errno 12] Cannot allocate memory",)),
    ("checkpoint-rename-race",  # axolotl-ai-cloud/axolotl#948 (transformers trainer._save_checkpoint)
     "FileNotFoundError: [Errno 2] No such file or directory: 'model/tmp-checkpoint-49' -> 'model/checkpoint-49'",
     ("FileNotFoundError: [Errno 2] No such file or directory: 'model/checkpoint-49/trainer_state.json'",
      "FileNotFoundError: [Errno 2] No such file or directory: '/data/train.json' -> '/data/train.bak'")),
    ("hccl-timeout",  # InternLM/lmdeploy#3354, the EI0002 text after its header
     "The wait execution of the Notify register times out. Reason: The Notify register has not received the Notify "
     "record from remote rank: [unknown]. base information: [streamID:[293579240], taskID[9865]]",
     ("The execution of the internal task times out.",)),
    ("parallel-size-mismatch",  # NVIDIA/Megatron-LM megatron/arguments.py validate_args
     "AssertionError: world size (16) is not divisible by tensor model parallel size (3)",
     ("AssertionError: number of layers (30) is not divisible by pipeline model parallel size (4)",)),
    ("parallel-size-mismatch",  # deepspeed/runtime/config.py _batch_assertion
     "AssertionError: Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * "
     "gradient_acc_step * world_size 16 != 5 * 1 * 3",
     ("AssertionError: Micro batch size per gpu: 0 has to be greater than 0",)),
    ("checkpoint-load-failure",
     "RuntimeError: PytorchStreamReader failed reading zip archive: failed finding central directory",
     # DeepSpeed's engine.load_checkpoint on a fresh start: a warning, no failure
     ("Unable to find latest file at /ckpt/latest, if trying to load latest checkpoint please ensure this file "
      "exists or pass an explicit checkpoint tag when loading a checkpoint.",)),
    ("loss-nan",  # deepspeed/runtime/fp16/loss_scaler.py
     "Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.",
     ("[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768",)),
    ("loss-nan",  # bigscience-workshop/Megatron-DeepSpeed#396: bf16, the NaN loss left out, no NaN iteration counted
     " iteration     5426/  250000 | consumed samples:        43408 | consumed tokens:     88899584 | elapsed time per "
     "iteration (ms): 4247.9 | learning rate: 2.999E-04 | global batch size:     8 | loss scale: 1.0 | grad norm: nan "
     "| actual seqlen:  2048 | number of skipped iterations:   0 | number of nan iterations:   0 | samples per "
     "second: 1.883 | TFLOPs: 78.36 |",
     (" iteration     5425/  250000 | consumed samples:        43400 | consumed tokens:     88883200 | elapsed time "
      "per iteration (ms): 4251.2 | learning rate: 2.999E-04 | global batch size:     8 | lm loss: 2.130412E+00 | "
      "loss scale: 1.0 | grad norm: 0.412 | actual seqlen:  2048 | number of skipped iterations:   0 | number of nan "
      "iterations:   0 | samples per second: 1.882 | TFLOPs: 78.31 |",)),
    ("loss-nan",  # hiyouga/LlamaFactory#7263: HF Trainer's logged dict
     "{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 9.99e-05, 'epoch': 0.41}",
     ("{'loss': 1.2113, 'grad_norm': 0.8571, 'learning_rate': 9.99e-05, 'epoch': 0.40}",)),
    ("rdma-qp-setup-failure",  # NCCL misc/ibvwrap.cc, as quoted in an NCCL FAQ (GID/RoCE mismatch)
     "misc/ibvwrap.cc:284 NCCL WARN Call to ibv_modify_qp failed with error Invalid argument",
     ("include/socket.h:403 NCCL WARN Connect to 10.0.0.2<43391> failed: Connection refused",)),
    ("rdma-qp-setup-failure",  # the HCA port gone (errno 19), ROCm/rccl#1303 and a debugging write-up
     "ibvwrap.c:174 NCCL WARN Call to ibv_modify_qp failed with error No such device errno 19",
     ("NCCL WARN NET/IB : No device found.",)),
    ("cpu-thermal-throttle",  # Linux therm_throt.c up to 5.4, as journalctl prints it (a Fedora 28 laptop)
     "[26670.911222] CPU2: Package temperature above threshold, cpu clock throttled (total events = 1)",
     ("[26670.911300] CPU2: Package temperature/speed normal",)),
    ("cpu-thermal-throttle",  # since 5.5 (pr_warn "... is above threshold, cpu clock is throttled")
     "kernel: mce: CPU9: Core temperature is above threshold, cpu clock is throttled (total events = 412)",
     ("kernel: mce: CPU9: Core temperature/speed normal (total events = 412)",
      "nvidia-smi: GPU 3 Clocks Event Reasons: SW Thermal Slowdown : Not Active")),
    ("cuda-unknown-error",  # open-mmlab/mmdetection#461
     "RuntimeError: CUDA error: unknown error",
     ("RuntimeError: CUDA error: out of memory", "OSError: [Errno 5] unknown error while reading shard")),
    ("cuda-unknown-error",  # nv-tlabs/3dgrut#191 (c10's what() of the same error)
     "  what():  CUDA error: unknown error",
     ("NCCL WARN Cuda failure 'out of memory'",)),
    ("cuda-unknown-error",  # NCCL's proxy thread on the lost device
     "gpu-h100-486:1527797:1527950 [3] proxy.cc:1497 NCCL WARN Cuda failure 'unknown error'", ()),
    ("cuda-unknown-error",  # torch/cutorch#197 (CUDA before 10 numbered it 30)
     "luajit: cuda runtime error (30) : unknown error at /tmp/luarocks_cutorch-scm-1-9927/cutorch/lib/THC/THCStorage.c:113",
     ("cuda runtime error (2) : out of memory at /tmp/THCStorage.c:66",)),
    ("program-bug",  # nlp-with-transformers/notebooks#99, the child's last traceback line under torchrun
     "KeyError: 'backend'",
     # a framework's NaN check and a settings check are not code bugs; nor is the launcher's summary
     ("AssertionError: Rank 3: found NaN in local grad norm in backward pass before data-parallel communication collective",
      "ValueError: Some specified arguments are not used by the HfArgumentParser: ['--foo']",
      "failed (exitcode: 1) local_rank: 0 (pid: 1622990) of binary: /usr/bin/python3")),
    ("program-bug",  # XLabs-AI/x-flux#76 (and deepspeedai/DeepSpeedExamples#622)
     "[rank1]: RuntimeError: The size of tensor a (2) must match the size of tensor b (64) at non-singleton dimension 2",
     ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
      "RuntimeError: CUDA error: an illegal memory access was encountered")),
    ("program-bug",  # datawhalechina/unlock-deepseek#42
     "RuntimeError: The expanded size of the tensor (10) must match the existing size (11) at non-singleton dimension 0.  "
     "Target sizes: [10].  Tensor sizes: [11]", ()),
    ("program-bug",  # torch's view() check, as a template with its numbers masked
     "RuntimeError: shape '[<*>, <*>, 32, 128]' is invalid for input of size <*>",
     ("RuntimeError: Error(s) in loading state_dict for GPTModel: size mismatch for embedding.weight",)),
    ("cuda-kernel-failure",  # CANN's runtime (PrintCoreErrorInfo), as Ascend's AI Core Error troubleshooting quotes it
     "The error from device(chipId:0, dieId:0), serial number is 1206, there is an aicore error exception, core id is 0, "
     "error code = 171, dump info: pc start: 0x120041000000, current: 0x120041000a80",
     # CANN's generic inner-error code alone says nothing of the device
     ("EZ9999: Inner Error!", "E39999: Inner Error!")),
    ("cuda-kernel-failure",  # older CANN, a device log's line
     "[ERROR] RUNTIME(10686,msame):2025-03-19-15:09:46.645.779 [device_error_proc.cc:634]10686 PrintCoreErrorInfo:"
     "[EXEC][DEFAULT]The error from device(0), serial number is 1, there is an aicore error, core id is 0, "
     "error code = 0x800000", ()),
    ("cuda-kernel-failure",  # torch_npu after it (ACL_ERROR_RT_AICORE_EXCEPTION)
     "RuntimeError: ACL stream synchronize failed, error code:507015",
     ("RuntimeError: ACL stream synchronize failed, error code:507053",)),
    ("hccl-rank-table-invalid",  # HCCL's communicator CheckRankTable
     "[Check][RankTable]errNo[0x0000000005000001] super_device_id is invalid in ranktable, ranktable config vaule: "
     "rankId[9], superDeviceId[0xffffffff]",
     # the table parsed fine; a peer's timeout waiting for the ranks the table describes wrongly
     ("[Parse][RankTable]rank table parse success, serverNum[2] deviceNum[16]",
      "[Wait][LinkEstablish]wait socket establish timeout, role[0] rank[11] timeout[120]")),
    ("hccl-rank-table-invalid",  # CANN's error code, HCCL's troubleshooting guide
     "EI0004: Illegal ranktable configuration", ()),
    ("checkpoint-rename-race",  # FanqingM/MM-Eureka-V0#8
     "OSError: [Errno 39] Directory not empty: '/root/results/tmp-checkpoint-s0yubqtr' -> '/root/results/checkpoint-50'",
     ()),
]


@pytest.mark.parametrize("pattern_id,line,near_misses", NEW_FAULTS)
def test_session_24_patterns_match_the_real_line_and_not_its_near_misses(pattern_id, line, near_misses):
    matches = match_patterns(seed_patterns(), [("E", line, line)])
    assert [m.pattern_id for m in matches] == [pattern_id]
    for near_miss in near_misses:
        assert pattern_id not in [m.pattern_id for m in match_patterns(seed_patterns(), [("E", near_miss, near_miss)])]


def test_disabled_patterns_is_a_list_of_ids_in_the_config():
    from l4spark.config import load_config
    from l4spark.errors import ConfigError

    config = load_config(overrides={"diagnosis.disabled_patterns": ["host-oom-kill", "shared-fs-stale-handle"]})
    assert config.diagnosis.disabled_patterns == ("host-oom-kill", "shared-fs-stale-handle")
    with pytest.raises(ConfigError, match="disabled_patterns"):
        load_config(overrides={"diagnosis.disabled_patterns": "host-oom-kill"})


def test_a_disabled_pattern_is_not_matched_and_its_class_goes_with_it(spark, nightly_clean):
    """``diagnose_jobs`` under ``disabled_patterns``: the job's best pattern of the clean nightly
    is no longer among its matches nor gives its fault class; the others still match."""
    import dataclasses

    from l4spark.diagnosis.assemble import diagnose_jobs
    from tests.nightly_support import nightly_config

    warehouse, _, tables = nightly_clean
    jobs = tables["diagnosis_jobs"]
    matched = jobs[jobs["matched_patterns"].map(lambda m: m is not None and len(m) > 0)]
    job = matched.iloc[0]
    best = list(job["matched_patterns"])[0]
    config = nightly_config(warehouse)
    config = dataclasses.replace(config, diagnosis=dataclasses.replace(config.diagnosis, disabled_patterns=(best,)))
    row = diagnose_jobs(spark, config, [job["job_id"]], progress=lambda m: None).jobs.iloc[0]
    assert row["status"] == "diagnosed"
    assert list(row["matched_patterns"]) == list(job["matched_patterns"])[1:]
    library = {p.pattern_id: p.fault_class for p in seed_patterns()}
    assert row["fault_class"] == (library[list(job["matched_patterns"])[1]] if len(job["matched_patterns"]) > 1 else None)
