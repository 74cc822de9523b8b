"""Jars from Maven Central, copied once into a folder of the checkout with ``mvn dependency:copy``.

Shared by ``delta_jars`` (Delta Lake) and ``storage_jars`` (Hadoop's storage connectors): each
names its artifacts (``group:artifact:version``) and its folder; this module finds and fetches them.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable, Sequence

log = logging.getLogger(__name__)


def jar_name(artifact: str) -> str:
    """The file name ``mvn dependency:copy`` gives ``group:artifact:version``."""
    _group, name, version = artifact.split(":")
    return f"{name}-{version}.jar"


def jars_in(base: Path, artifacts: Sequence[str]) -> list[Path] | None:
    """The jar files of ``artifacts`` in ``base``, or None unless all of them are there."""
    jars = [base / jar_name(artifact) for artifact in artifacts]
    return jars if all(jar.is_file() for jar in jars) else None


def copy_jars(artifacts: Sequence[str], base: Path, error: type[Exception]) -> list[Path]:
    """Copy the ``artifacts`` not yet in ``base`` from Maven Central; their paths. Raises
    ``error`` naming what failed (no ``mvn`` on PATH, or Maven could not resolve one)."""
    mvn = shutil.which("mvn")
    for artifact in artifacts:
        if (base / jar_name(artifact)).is_file():
            continue
        if mvn is None:
            raise error(f"need Maven (mvn) on PATH to fetch {artifact} into {base}")
        command = [mvn, "-q", "-B", "dependency:copy", f"-Dartifact={artifact}", f"-DoutputDirectory={base}"]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0 or not (base / jar_name(artifact)).is_file():
            raise error(f"mvn could not copy {artifact} into {base} (exit {done.returncode}):\n"
                        f"{(done.stdout + done.stderr)[-2000:]}")
        log.info("fetched %s into %s", artifact, base)
    return [base / jar_name(artifact) for artifact in artifacts]


def fetch_command(fetch: Callable[[str | None], list[Path]], error: type[Exception], argv: list[str]) -> int:
    """``python -m <module> [FOLDER]``: fetch into FOLDER (or the default), print each jar; 1 on ``error``."""
    try:
        jars = fetch(argv[0] if argv else None)
    except error as exc:
        print(exc, file=sys.stderr)
        return 1
    for jar in jars:
        print(jar)
    return 0
