"""Line formats: timestamps, framework headers and collector wrappers of one rank's log.

Every simulated line is built here as ``[collector timestamp] [static wrappers] header message``.
The header depends on who writes the line (Python logging of DeepSpeed or HF, torch's c10
glog-style logger, NCCL's debug printer, CANN, the kernel, or a bare ``print``); the wrappers
depend on the job's launcher and log collector. Timestamps are rendered from the *node's*
clock (true time + the node's skew) through per-second caches, so formatting a line costs one
dict lookup and one ``%`` operation.
"""

from __future__ import annotations

import re
import time
from typing import Callable

LEVELS = {
    "I": "INFO", "W": "WARN", "E": "ERROR", "F": "FATAL",
    "INFO": "INFO", "WARNING": "WARN", "WARN": "WARN", "ERROR": "ERROR",
    "CRITICAL": "FATAL", "FATAL": "FATAL", "DEBUG": "DEBUG", None: "NONE",
}

_PLACEHOLDER = re.compile(r"(?<!\{)\{[^{}]*\}(?!\})")


def template_of(pattern: str) -> str:
    """The simulator template of a ``str.format`` pattern: every placeholder becomes ``<*>``."""
    return _PLACEHOLDER.sub("<*>", pattern).replace("{{", "{").replace("}}", "}")


class Clock:
    """Renders absolute times (float epoch seconds, already skewed) in the styles logs use."""

    def __init__(self) -> None:
        self._c: dict[str, dict[int, str]] = {}

    def _base(self, style: str, fmt: str, sec: int) -> str:
        cache = self._c.setdefault(style, {})
        base = cache.get(sec)
        if base is None:
            base = cache[sec] = time.strftime(fmt, time.gmtime(sec))
        return base

    def py(self, t: float) -> str:
        """Python logging asctime: ``2026-11-20 03:14:15,926``."""
        s = int(t)
        return "%s,%03d" % (self._base("py", "%Y-%m-%d %H:%M:%S", s), (t - s) * 1000)

    def sec(self, t: float) -> str:
        """``2026-11-20 03:14:15`` (Megatron iteration lines, datetime prints)."""
        return self._base("py", "%Y-%m-%d %H:%M:%S", int(t))

    def glog(self, t: float, digits: int = 6) -> str:
        """glog / c10 style ``1120 03:14:15.926535`` (no year); 9 digits in torch >= 2.4."""
        s = int(t)
        frac = "%06d" % ((t - s) * 1e6) if digits == 6 else "%09d" % ((t - s) * 1e9)
        return "%s.%s" % (self._base("glog", "%m%d %H:%M:%S", s), frac)

    def cann(self, t: float) -> str:
        """CANN plog style ``2026-11-20-03:14:15.926.535``."""
        s = int(t)
        us = int((t - s) * 1e6)
        return "%s.%03d.%03d" % (self._base("cann", "%Y-%m-%d-%H:%M:%S", s), us // 1000, us % 1000)

    def us_date(self, t: float) -> str:
        """HF example scripts: ``11/20/2026 03:14:15``."""
        return self._base("us", "%m/%d/%Y %H:%M:%S", int(t))

    def rfc_nano(self, t: float) -> str:
        """Container runtime (CRI) ``2026-11-20T03:14:15.926535897Z``."""
        s = int(t)
        return "%s.%09dZ" % (self._base("rfc", "%Y-%m-%dT%H:%M:%S", s), (t - s) * 1e9)

    def rfc_ms(self, t: float) -> str:
        """Collector ``2026-11-20T03:14:15.926+00:00``."""
        s = int(t)
        return "%s.%03d+00:00" % (self._base("rfc", "%Y-%m-%dT%H:%M:%S", s), (t - s) * 1000)

    def dmesg(self, t: float) -> str:
        """``dmesg -T``: ``Thu Nov 20 03:14:15 2026``."""
        return self._base("dmesg", "%a %b %d %H:%M:%S %Y", int(t))

    def syslog(self, t: float) -> str:
        """``Nov 20 03:14:15``."""
        return self._base("syslog", "%b %d %H:%M:%S", int(t))


def iso(t: float) -> str:
    """ISO 8601 UTC with milliseconds (job.json and labels)."""
    s = int(t)
    return "%s.%03dZ" % (time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(s)), (t - s) * 1000)


class Truth:
    """Ground truth collected while a job is written: the failure-indicating messages.

    Writers *register* a message on the rank that prints it; counts are then taken by
    scanning the rank's failure lines for every message it registered, so ``count`` is exactly
    the number of lines that contain the message (a message repeated inside a longer line,
    such as an exception quoted by ``what():``, counts there too).
    """

    def __init__(self) -> None:
        self.messages: dict[str, list] = {}  # message -> [template, level, count, nodes, first_t]
        self.first_by_node: dict[str, float] = {}

    def register(self, msg: str, tmpl: str, level: str, node: str, t: float) -> None:
        entry = self.messages.get(msg)
        if entry is None:
            self.messages[msg] = [tmpl, level, 0, set(), t]
        elif t < entry[4]:
            entry[4] = t
        if t < self.first_by_node.get(node, float("inf")):
            self.first_by_node[node] = t

    def scan(self, r: "RankLog", start: int) -> None:
        """Count the lines of r (from index start) carrying each message r registered.

        With many distinct messages on one rank (per-iteration lines of a slowdown or a
        divergence, each printed once) a full scan would be quadratic; there the count of
        registering lines is used, which is exact because such lines embed no other message.
        """
        if not r.marked:
            return
        host = r.host
        if len(r.marked) > 64:
            for m, n in r.marked.items():
                entry = self.messages[m]
                entry[2] += n
                entry[3].add(host)
            return
        msgs = [(m, self.messages[m]) for m in r.marked]
        for line in r.out[start:]:
            for m, entry in msgs:
                if m in line:
                    entry[2] += 1
                    entry[3].add(host)


class RankLog:
    """The lines of one rank file, with the header writers of every framework.

    ``tmpl`` on a writer marks the line as failure-indicating: the message (the text after the
    header) and its template go to the job's ground truth.
    """

    def __init__(self, *, host: str, ip: str, rank: int, local: int, pid: int, skew: float,
                 clock: Clock, truth: Truth, prefix: str, collector: str | None,
                 c10_style: int, agent_style: int, kernel_style: str | None, boot: float) -> None:
        self.host, self.ip, self.rank, self.local, self.pid = host, ip, rank, local, pid
        self.skew = skew
        self.clock = clock
        self.truth = truth
        self.out: list[str] = []
        self.marked: dict[str, int] = {}  # indicating message -> lines that registered it
        self.master = "localhost"
        self.until = float("inf")  # true time after which healthy lines are no longer written
        self.pre = prefix
        # the launcher (torchrun agent, pip in the entrypoint, the kernel) does not get torchrun's [defaultN]: prefix
        self.pre_launcher = "" if prefix.startswith("[default") or prefix[:1].isdigit() else prefix
        self.c10_style = c10_style
        self.agent_style = agent_style
        self.kernel_style = kernel_style if local == 0 else None
        self.boot = boot
        self.tb_pre = f"[rank{rank}]: " if c10_style >= 3 else ""
        self.tsw: Callable[[float, bool], str] | None = None
        if collector == "cri":
            rf = clock.rfc_nano
            self.tsw = lambda t, err: rf(t) + (" stderr F " if err else " stdout F ")
        elif collector == "rfc3339":
            rm = clock.rfc_ms
            self.tsw = lambda t, err: rm(t) + " "

    # -- core ------------------------------------------------------------------------------
    def put(self, t: float, line: str, err: bool = False) -> None:
        if t >= self.until:
            return
        tsw = self.tsw
        if tsw is None:
            self.out.append(self.pre + line)
        else:
            self.out.append(tsw(t + self.skew + 0.0004, err) + self.pre + line)

    def bulk(self, t: float, head: str, msgs: list[str], err: bool = False) -> None:
        """Many lines written within microseconds (one header, one collector timestamp)."""
        if t >= self.until:
            return
        pre = (self.tsw(t + self.skew + 0.0004, err) if self.tsw else "") + self.pre + head
        self.out.extend([pre + m for m in msgs])

    def _mark(self, t: float, msg: str, tmpl: str | None, level: str | None) -> None:
        if tmpl is not None and t < self.until:
            self.marked[msg] = self.marked.get(msg, 0) + 1
            self.truth.register(msg, tmpl, LEVELS[level], self.host, t)

    def mark(self, t: float, msg: str, tmpl: str, level: str | None) -> None:
        """Register an indicating message written by a fast path that bypasses the writers."""
        self._mark(t, msg, tmpl, level)

    # -- writers ---------------------------------------------------------------------------
    def plain(self, t: float, msg: str, err: bool = False, tmpl: str | None = None,
              level: str | None = None, mark: str | None = None) -> None:
        """A bare print (Megatron print_rank_0, tracebacks, pip output).

        ``mark``: the indicating message carried by the line when it is not the whole line
        (a traceback line behind a ``[rankN]: `` prefix, an exception quoted by ``what():``).
        """
        self.put(t, msg, err)
        self._mark(t, mark or msg, tmpl, level)

    def tb(self, t: float, lines: list[str], marks: dict[int, tuple[str, str | None]] | None = None,
           dt: float = 0.00002) -> float:
        """A Python traceback (stderr, no timestamps; ``[rankN]: `` prefix on torch >= 2.4).

        ``marks`` maps a line index to (template, level) for the indicating lines.
        """
        pre = self.tb_pre
        for i, line in enumerate(lines):
            self.put(t, pre + line, True)
            if marks and i in marks:
                tmpl, level = marks[i]
                self._mark(t, line, tmpl, level)
            t += dt
        return t

    def pylog(self, t: float, level: str, src: str, msg: str, tmpl: str | None = None) -> None:
        """DeepSpeed logger: ``[2026-11-20 03:14:15,926] [INFO] [engine.py:123:fn] msg``."""
        self.put(t, "[%s] [%s] [%s] %s" % (self.clock.py(t + self.skew), level, src, msg),
                 level != "INFO")
        self._mark(t, msg, tmpl, level)

    def ds_bare(self, t: float, level: str, msg: str) -> None:
        """DeepSpeed op-builder warnings: `` [WARNING]  async_io requires ...``."""
        self.put(t, " [%s]  %s" % (level, msg), True)

    def hf(self, t: float, level: str, src: str, msg: str, tmpl: str | None = None) -> None:
        """transformers logging: ``[INFO|trainer.py:2078] 2026-11-20 03:14:15,926 >> msg``."""
        self.put(t, "[%s|%s] %s >> %s" % (level, src, self.clock.py(t + self.skew), msg),
                 level != "INFO")
        self._mark(t, msg, tmpl, level)

    def hf_main(self, t: float, level: str, name: str, msg: str) -> None:
        """HF example scripts: ``11/20/2026 03:14:15 - INFO - __main__ - msg``."""
        self.put(t, "%s - %s - %s - %s" % (self.clock.us_date(t + self.skew), level, name, msg),
                 level != "INFO")

    def basic(self, t: float, level: str, name: str, msg: str) -> None:
        """Python root logger default format: ``INFO:megatron.core.datasets...:msg``."""
        self.put(t, "%s:%s:%s" % (level, name, msg), level != "INFO")

    def c10(self, t: float, lvl: str, src: str, msg: str, tmpl: str | None = None,
            mark: str | None = None) -> None:
        """torch C++ logger (c10): three generations of header."""
        st = self.c10_style
        if st >= 3:
            head = "[rank%d]:[%s%s %s] " % (self.rank, lvl, self.clock.glog(t + self.skew, 9), src)
        elif st == 2:
            head = "[rank%d]:[%s %s] " % (self.rank, lvl, src)
        else:
            head = "[%s %s] " % (lvl, src)
        self.put(t, head + msg, True)
        self._mark(t, mark or msg, tmpl, lvl)

    def glog_plain(self, t: float, lvl: str, src: str, msg: str, tmpl: str | None = None) -> None:
        """c10 logger of a non-rank process (the launcher): no ``[rankN]:`` prefix."""
        if self.c10_style >= 3:
            head = "[%s%s %s] " % (lvl, self.clock.glog(t + self.skew, 9), src)
        else:
            head = "[%s %s] " % (lvl, src)
        self.lplain(t, head + msg, True)
        self._mark(t, msg, tmpl, lvl)

    def agent(self, t: float, lvl: str, src: str, logger: str, msg: str,
              tmpl: str | None = None) -> None:
        """torchrun elastic agent: glog style (torch >= 2.4) or Python logging (older)."""
        st = self.agent_style
        if st >= 3:
            head = "%s%s %d %s] " % (lvl, self.clock.glog(t + self.skew, 6), 139780000000000 + self.pid, src)
        elif st == 2:
            head = "[%s] %s: [%s] " % (self.clock.py(t + self.skew), logger, LEVELS[lvl].replace("WARN", "WARNING"))
        else:
            head = "%s:%s:" % (LEVELS[lvl].replace("WARN", "WARNING"), logger)
        pre, self.pre = self.pre, self.pre_launcher
        self.put(t, head + msg, lvl != "I")
        self.pre = pre
        self._mark(t, msg, tmpl, lvl)

    def lplain(self, t: float, msg: str, err: bool = True, tmpl: str | None = None, level: str | None = None) -> None:
        """A bare line of the launcher process (no torchrun worker prefix)."""
        pre, self.pre = self.pre, self.pre_launcher
        self.put(t, msg, err)
        self.pre = pre
        self._mark(t, msg, tmpl, level)

    def nccl(self, t: float, msg: str, tid: int, tmpl: str | None = None) -> None:
        """NCCL INFO: ``gpu-h100-017:41233:41420 [3] NCCL INFO msg`` (no timestamp)."""
        self.put(t, "%s:%d:%d [%d] NCCL INFO %s" % (self.host, self.pid, tid, self.local, msg))
        self._mark(t, msg, tmpl, "INFO")

    def nccl_warn(self, t: float, src: str, msg: str, tid: int, tmpl: str | None = None) -> None:
        """NCCL WARN: printed after a bare newline, with the source file and line."""
        self.put(t, "", True)
        self.put(t, "%s:%d:%d [%d] %s NCCL WARN %s" % (self.host, self.pid, tid, self.local, src, msg), True)
        self._mark(t, msg, tmpl, "WARN")

    def cann(self, t: float, level: str, module: str, src: str, msg: str, tid: int | None = None,
             tmpl: str | None = None) -> None:
        """CANN plog to stdout: ``[ERROR] HCCL(1446,python):2026-11-20-03:14:15.916.627 [f.cc:117] [1446]msg``."""
        self.put(t, "[%s] %s(%d,python):%s [%s] [%d]%s" % (
            level, module, self.pid, self.clock.cann(t + self.skew), src, tid or self.pid, msg),
            level != "INFO")
        self._mark(t, msg, tmpl, level)

    def npu_code(self, t: float, code: str, msg: str, tmpl: str | None = None) -> None:
        """Ascend error-code line: ``EI0006: [PID: 1446] 2026-11-20-03:14:15.916.627 msg``."""
        self.put(t, "%s%s: [PID: %d] %s %s" % (self.tb_pre, code, self.pid, self.clock.cann(t + self.skew), msg), True)
        self._mark(t, msg, tmpl, "ERROR")

    def kern(self, t: float, msg: str, tmpl: str | None = None) -> bool:
        """A kernel (dmesg) line; only the node's local-rank-0 file carries them, when collected."""
        st = self.kernel_style
        if st is None:
            return False
        ts = t + self.skew
        if st == "dmesg_T":
            line = "[%s] %s" % (self.clock.dmesg(ts), msg)
        elif st == "uptime":
            line = "[%12.6f] %s" % (ts - self.boot, msg)
        else:
            line = "%s %s kernel: %s" % (self.clock.syslog(ts), self.host, msg)
        pre, self.pre = self.pre, self.pre_launcher
        self.put(t, line, True)
        self.pre = pre
        self._mark(t, msg, tmpl, None)
        return True
