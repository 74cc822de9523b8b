"""Real-format training log lines (wrapped and bare) used by the structuring tests.

Each entry: raw line, expected (ts text, level, message) from the default rules.
"""

CORPUS = [
    ("[2026-11-20 01:00:01,123] [INFO] [logging.py:96:log_dist] [Rank 0] step=100, skipped=0, lr=[0.00015]",
     ("2026-11-20 01:00:01.123", "INFO", "step=100, skipped=0, lr=[0.00015]")),
    (" [2026-11-20 01:00:03] iteration      100/  500000 | consumed samples:        51200 |",
     ("2026-11-20 01:00:03", None, "iteration      100/  500000 | consumed samples:        51200 |")),
    ("gpu-h100-017:41233:41420 [3] NCCL WARN NET/IB : Got completion from peer 10.3.1.17<52011> with error 12",
     (None, "WARN", "NCCL WARN NET/IB : Got completion from peer 10.3.1.17<52011> with error 12")),
    ("[ERROR] HCCL(12345,python):2026-11-20-01:00:05.123.456 [hccl_communicator.cc:123][12345]Notify wait timeout",
     ("2026-11-20 01:00:05.123456", "ERROR", "HCCL [hccl_communicator.cc:123][12345]Notify wait timeout")),
    ("2026-11-20T01:00:01.123456789Z stdout F [default3]:Traceback (most recent call last):",
     ("2026-11-20T01:00:01.123456789Z", None, "Traceback (most recent call last):")),
    ("[default3]:  File \"/workspace/train.py\", line 12, in <module>",
     (None, None, "  File \"/workspace/train.py\", line 12, in <module>")),
    ("2026-11-20 01:00:09,555 - WARNING - torch.distributed: something",
     ("2026-11-20 01:00:09.555", "WARN", "torch.distributed: something")),
    ("gpu-h100-017: 2026-11-20 01:00:10 ERROR checkpoint save failed",
     ("2026-11-20 01:00:10", "ERROR", "checkpoint save failed")),
    ("12: [2026-11-20 01:00:03] iteration 7/ 10 |",
     ("2026-11-20 01:00:03", None, "iteration 7/ 10 |")),
    ("[12345.678901] NVRM: Xid (PCI:0000:3b:00): 79, pid=12345, GPU has fallen off the bus.",
     (None, None, "NVRM: Xid (PCI:0000:3b:00): 79, pid=12345, GPU has fallen off the bus.")),
    ("E1120 01:00:11.123456 12345 ProcessGroupNCCL.cpp:1234] [Rank 3] Watchdog caught collective operation timeout",
     (None, "ERROR", "[Rank 3] Watchdog caught collective operation timeout")),
    ("{'loss': 2.1543, 'grad_norm': 0.83, 'learning_rate': 1.9e-05, 'epoch': 0.12}",
     (None, None, "{'loss': 2.1543, 'grad_norm': 0.83, 'learning_rate': 1.9e-05, 'epoch': 0.12}")),
    ("[1,3]<stderr>:WARNING: Logging before InitGoogleLogging() is written to STDERR",
     (None, "WARN", "WARNING: Logging before InitGoogleLogging() is written to STDERR")),
    ("2026-11-20T01:00:01Z [default0]:[default0]:hello",
     ("2026-11-20T01:00:01Z", None, "hello")),
    ("", (None, None, "")),
    ("just a plain line with café ünïcode", (None, None, "just a plain line with café ünïcode")),
]
