"""Python and C++ stack traces as the frameworks print them when a rank dies."""

from __future__ import annotations

_PY = "/usr/local/lib/python3.10/dist-packages"
_MEG = "/workspace/Megatron-LM"
_MDS = "/workspace/Megatron-DeepSpeed"

_STACKS: dict[tuple[str, str], list[tuple[str, int, str, str]]] = {
    ("megatron", "init"): [
        (f"{_MEG}/pretrain_gpt.py", 278, "<module>", "pretrain("),
        (f"{_MEG}/megatron/training/training.py", 280, "pretrain", "initialize_megatron("),
        (f"{_MEG}/megatron/training/initialize.py", 98, "initialize_megatron", "finish_mpu_init()"),
        (f"{_MEG}/megatron/training/initialize.py", 78, "finish_mpu_init", "_initialize_distributed(get_embedding_ranks, get_position_embedding_ranks)"),
        (f"{_MEG}/megatron/training/initialize.py", 317, "_initialize_distributed", "torch.distributed.init_process_group("),
    ],
    ("megatron", "model_loading"): [
        (f"{_MEG}/pretrain_gpt.py", 278, "<module>", "pretrain("),
        (f"{_MEG}/megatron/training/training.py", 316, "pretrain", "model, optimizer, opt_param_scheduler = setup_model_and_optimizer("),
        (f"{_MEG}/megatron/training/training.py", 701, "setup_model_and_optimizer", "args.iteration, args.num_floating_point_operations_so_far = load_checkpoint("),
        (f"{_MEG}/megatron/training/checkpointing.py", 1090, "load_checkpoint", "state_dict, checkpoint_name, release = _load_base_checkpoint("),
        (f"{_MEG}/megatron/core/dist_checkpointing/serialization.py", 133, "load", "loaded_state_dict = sharded_strategy.load(sharded_state_dict, checkpoint_dir)"),
        (f"{_PY}/torch/distributed/checkpoint/filesystem.py", 658, "read_data", "with self.fs.create_stream(new_path, \"rb\") as stream:"),
    ],
    ("megatron", "data_loading"): [
        (f"{_MEG}/pretrain_gpt.py", 278, "<module>", "pretrain("),
        (f"{_MEG}/megatron/training/training.py", 341, "pretrain", "= build_train_valid_test_data_iterators("),
        (f"{_MEG}/megatron/core/datasets/indexed_dataset.py", 254, "__init__", "self.bin_buffer_mmap = numpy.memmap(self.bin_path, mode=\"r\", order=\"C\")"),
    ],
    ("megatron", "training"): [
        (f"{_MEG}/pretrain_gpt.py", 278, "<module>", "pretrain("),
        (f"{_MEG}/megatron/training/training.py", 359, "pretrain", "iteration, num_floating_point_operations_so_far = train("),
        (f"{_MEG}/megatron/training/training.py", 1275, "train", "train_step(forward_step_func,"),
        (f"{_MEG}/megatron/training/training.py", 736, "train_step", "losses_reduced = forward_backward_func("),
        (f"{_MEG}/megatron/core/pipeline_parallel/schedules.py", 1429, "forward_backward_pipelining_without_interleaving", "output_tensor, num_tokens = forward_step("),
        (f"{_MEG}/megatron/core/pipeline_parallel/schedules.py", 275, "forward_step", "output_tensor, loss_func = forward_step_func(data_iterator, model)"),
        (f"{_MEG}/pretrain_gpt.py", 205, "forward_step", "output_tensor = model(tokens, position_ids, attention_mask,"),
    ],
    ("megatron", "checkpoint_saving"): [
        (f"{_MEG}/pretrain_gpt.py", 278, "<module>", "pretrain("),
        (f"{_MEG}/megatron/training/training.py", 359, "pretrain", "iteration, num_floating_point_operations_so_far = train("),
        (f"{_MEG}/megatron/training/training.py", 1356, "train", "save_checkpoint_and_time(iteration, model, optimizer,"),
        (f"{_MEG}/megatron/training/training.py", 1003, "save_checkpoint_and_time", "save_checkpoint(iteration, model, optimizer, opt_param_scheduler,"),
        (f"{_MEG}/megatron/training/checkpointing.py", 409, "save_checkpoint", "async_save_request = dist_checkpointing.save(state_dict, checkpoint_name, save_strategy,"),
        (f"{_PY}/torch/distributed/checkpoint/filesystem.py", 306, "_write_files_from_queue", "_write_item(stream, data, write_item, storage_key)"),
    ],
    # Megatron-DeepSpeed (microsoft/Megatron-DeepSpeed at f4157bea: pretrain_gpt.py, megatron/training.py,
    # megatron/initialize.py, megatron/checkpointing.py, megatron/data/indexed_dataset.py) over DeepSpeed's engine
    ("megatron_deepspeed", "init"): [
        (f"{_MDS}/pretrain_gpt.py", 360, "<module>", "pretrain(train_valid_test_datasets_provider,"),
        (f"{_MDS}/megatron/training.py", 129, "pretrain", "initialize_megatron(extra_args_provider=extra_args_provider,"),
        (f"{_MDS}/megatron/initialize.py", 89, "initialize_megatron", "finish_mpu_init()"),
        (f"{_MDS}/megatron/initialize.py", 69, "finish_mpu_init", "_initialize_distributed()"),
        (f"{_MDS}/megatron/initialize.py", 233, "_initialize_distributed", "deepspeed.init_distributed()"),
        (f"{_PY}/deepspeed/comm/comm.py", 670, "init_distributed", "cdb = TorchBackend(dist_backend, timeout, init_method, rank, world_size)"),
    ],
    ("megatron_deepspeed", "model_loading"): [
        (f"{_MDS}/pretrain_gpt.py", 360, "<module>", "pretrain(train_valid_test_datasets_provider,"),
        (f"{_MDS}/megatron/training.py", 172, "pretrain", "model, optimizer, opt_param_scheduler = setup_model_and_optimizer("),
        (f"{_MDS}/megatron/training.py", 640, "setup_model_and_optimizer", "args.iteration = load_checkpoint(model, optimizer, opt_param_scheduler)"),
        (f"{_MDS}/megatron/checkpointing.py", 548, "load_checkpoint", "loaded_dir, state_dict = model[0].load_checkpoint(load_dir,"),
        (f"{_PY}/deepspeed/runtime/engine.py", 2804, "load_checkpoint", "load_path, client_states = self._load_checkpoint(load_dir,"),
        (f"{_PY}/deepspeed/runtime/checkpoint_engine/torch_checkpoint_engine.py", 28, "load", "partition = torch.load(path, map_location=map_location)"),
    ],
    ("megatron_deepspeed", "data_loading"): [
        (f"{_MDS}/pretrain_gpt.py", 360, "<module>", "pretrain(train_valid_test_datasets_provider,"),
        (f"{_MDS}/megatron/training.py", 196, "pretrain", "= build_train_valid_test_data_iterators("),
        (f"{_MDS}/megatron/data/indexed_dataset.py", 507, "__init__", "self._bin_buffer_mmap = np.memmap(data_file_path(self._path), mode='r', order='C')"),
    ],
    ("megatron_deepspeed", "training"): [
        (f"{_MDS}/pretrain_gpt.py", 360, "<module>", "pretrain(train_valid_test_datasets_provider,"),
        (f"{_MDS}/megatron/training.py", 235, "pretrain", "iteration = train(forward_step_func,"),
        (f"{_MDS}/megatron/training.py", 1269, "train", "train_step(forward_step_func,"),
        (f"{_MDS}/megatron/training.py", 677, "train_step", "loss = model[0].train_batch(data_iter=data_iterator)"),
        (f"{_PY}/deepspeed/runtime/pipe/engine.py", 388, "train_batch", "self._exec_schedule(sched)"),
        (f"{_PY}/deepspeed/runtime/pipe/engine.py", 1422, "_exec_schedule", "self._exec_instr(**cmd.kwargs)"),
    ],
    ("megatron_deepspeed", "checkpoint_saving"): [
        (f"{_MDS}/pretrain_gpt.py", 360, "<module>", "pretrain(train_valid_test_datasets_provider,"),
        (f"{_MDS}/megatron/training.py", 235, "pretrain", "iteration = train(forward_step_func,"),
        (f"{_MDS}/megatron/training.py", 1338, "train", "save_checkpoint_and_time(iteration, model, optimizer,"),
        (f"{_MDS}/megatron/training.py", 1203, "save_checkpoint_and_time", "save_checkpoint(iteration, model, optimizer, opt_param_scheduler)"),
        (f"{_MDS}/megatron/checkpointing.py", 303, "save_checkpoint", "model[0].save_checkpoint(checkpoint_name, client_state=state_dict)"),
        (f"{_PY}/deepspeed/runtime/engine.py", 3149, "save_checkpoint", "self._save_zero_checkpoint(save_dir, tag)"),
        (f"{_PY}/deepspeed/runtime/checkpoint_engine/torch_checkpoint_engine.py", 22, "save", "torch.save(state_dict, path)"),
    ],
    ("deepspeed", "init"): [
        ("/workspace/train.py", 388, "<module>", "main()"),
        ("/workspace/train.py", 201, "main", "deepspeed.init_distributed(dist_backend=\"nccl\")"),
        (f"{_PY}/deepspeed/comm/comm.py", 670, "init_distributed", "cdb = TorchBackend(dist_backend, timeout, init_method, rank, world_size)"),
    ],
    ("deepspeed", "model_loading"): [
        ("/workspace/train.py", 388, "<module>", "main()"),
        ("/workspace/train.py", 262, "main", "engine.load_checkpoint(args.ckpt_dir)"),
        (f"{_PY}/deepspeed/runtime/engine.py", 2804, "load_checkpoint", "load_path, client_states = self._load_checkpoint(load_dir,"),
        (f"{_PY}/deepspeed/runtime/checkpoint_engine/torch_checkpoint_engine.py", 28, "load", "partition = torch.load(path, map_location=map_location)"),
    ],
    ("deepspeed", "data_loading"): [
        ("/workspace/train.py", 388, "<module>", "main()"),
        ("/workspace/train.py", 233, "main", "train_ds = load_from_disk(args.data_path)"),
    ],
    ("deepspeed", "training"): [
        ("/workspace/train.py", 388, "<module>", "main()"),
        ("/workspace/train.py", 331, "main", "loss = engine(**batch).loss"),
        (f"{_PY}/deepspeed/utils/nvtx.py", 15, "wrapped_fn", "ret_val = func(*args, **kwargs)"),
        (f"{_PY}/deepspeed/runtime/engine.py", 1899, "forward", "loss = self.module(*inputs, **kwargs)"),
        (f"{_PY}/torch/nn/modules/module.py", 1562, "_call_impl", "return forward_call(*args, **kwargs)"),
    ],
    ("deepspeed", "checkpoint_saving"): [
        ("/workspace/train.py", 388, "<module>", "main()"),
        ("/workspace/train.py", 352, "main", "engine.save_checkpoint(args.ckpt_dir)"),
        (f"{_PY}/deepspeed/runtime/engine.py", 3149, "save_checkpoint", "self._save_zero_checkpoint(save_dir, tag)"),
        (f"{_PY}/deepspeed/runtime/engine.py", 3535, "_save_zero_checkpoint", "self.checkpoint_engine.save(zero_sd, zero_checkpoint_name)"),
        (f"{_PY}/deepspeed/runtime/checkpoint_engine/torch_checkpoint_engine.py", 22, "save", "torch.save(state_dict, path)"),
    ],
    ("hf_trainer", "init"): [
        ("/workspace/run_clm.py", 671, "<module>", "main()"),
        ("/workspace/run_clm.py", 261, "main", "model_args, data_args, training_args = parser.parse_args_into_dataclasses()"),
        (f"{_PY}/transformers/training_args.py", 1764, "__post_init__", "and (self.device.type == \"cpu\" and not is_torch_greater_or_equal_than_2_3)"),
    ],
    ("hf_trainer", "model_loading"): [
        ("/workspace/run_clm.py", 671, "<module>", "main()"),
        ("/workspace/run_clm.py", 436, "main", "model = AutoModelForCausalLM.from_pretrained("),
        (f"{_PY}/transformers/modeling_utils.py", 4014, "from_pretrained", ") = cls._load_pretrained_model("),
        (f"{_PY}/transformers/modeling_utils.py", 555, "load_state_dict", "with safe_open(checkpoint_file, framework=\"pt\") as f:"),
    ],
    ("hf_trainer", "data_loading"): [
        ("/workspace/run_clm.py", 671, "<module>", "main()"),
        ("/workspace/run_clm.py", 322, "main", "raw_datasets = load_dataset("),
    ],
    ("hf_trainer", "training"): [
        ("/workspace/run_clm.py", 671, "<module>", "main()"),
        ("/workspace/run_clm.py", 619, "main", "train_result = trainer.train(resume_from_checkpoint=checkpoint)"),
        (f"{_PY}/transformers/trainer.py", 1938, "train", "return inner_training_loop("),
        (f"{_PY}/transformers/trainer.py", 2279, "_inner_training_loop", "tr_loss_step = self.training_step(model, inputs)"),
        (f"{_PY}/transformers/trainer.py", 3318, "training_step", "loss = self.compute_loss(model, inputs)"),
    ],
    ("hf_trainer", "checkpoint_saving"): [
        ("/workspace/run_clm.py", 671, "<module>", "main()"),
        ("/workspace/run_clm.py", 619, "main", "train_result = trainer.train(resume_from_checkpoint=checkpoint)"),
        (f"{_PY}/transformers/trainer.py", 2356, "_inner_training_loop", "self._maybe_log_save_evaluate(tr_loss, grad_norm, model, trial, epoch, ignore_keys_for_eval)"),
        (f"{_PY}/transformers/trainer.py", 2807, "_maybe_log_save_evaluate", "self._save_checkpoint(model, trial, metrics=metrics)"),
        (f"{_PY}/transformers/trainer.py", 3474, "_save_checkpoint", "self._save_optimizer_and_scheduler(output_dir)"),
    ],
}


def python_traceback(framework: str, stage: str, exception_lines: list[str], extra: list[tuple[str, int, str, str]] = ()) -> list[str]:
    """A ``Traceback (most recent call last):`` block ending in the exception lines."""
    family = "megatron" if framework == "mindspeed" else framework
    stack = _STACKS.get((family, stage)) or _STACKS[(family, "training")]
    lines = ["Traceback (most recent call last):"]
    for path, no, fn, code in list(stack) + list(extra):
        lines.append('  File "%s", line %d, in %s' % (path, no, fn))
        lines.append("    " + code)
    return lines + exception_lines


def cpp_frames(rng, origin: str, lib: str = "libc10.so") -> list[str]:
    """``Exception raised from ... (most recent call first):`` and a few native frames."""
    base = 0x7F0000000000 + rng.getrandbits(28) * 0x1000
    names = [("c10::Error::Error(c10::SourceLocation, std::string) + 0x96", "libc10.so"),
             ("c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::duration<long, std::ratio<1l, 1000l> > >) + 0x1d2", "libtorch_cuda.so"),
             ("c10d::ProcessGroupNCCL::watchdogHandler() + 0x233", "libtorch_cuda.so"),
             ("c10d::ProcessGroupNCCL::ncclCommWatchdog() + 0x14d", "libtorch_cuda.so"),
             ("<unknown function> + 0xdc253", "libstdc++.so.6"),
             ("<unknown function> + 0x94ac3", "libc.so.6"),
             ("<unknown function> + 0x126850", "libc.so.6")]
    lines = ["Exception raised from %s (most recent call first):" % origin]
    for i, (name, so) in enumerate(names):
        where = "/usr/lib/x86_64-linux-gnu/" + so if so.startswith("lib") and ".so." in so else "%s/torch/lib/%s" % (_PY, so)
        lines.append("frame #%d: %s (0x%x in %s)" % (i, name, base + i * 0x11d0f, where))
    lines.append("")
    return lines
