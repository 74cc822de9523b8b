"""The package's shape (docs/architecture.md): no import cycle, dependencies one way.

Reads every module's imports (top-level and inside functions: a lazy import is still a
dependency) with ``ast``; runs nothing, needs no Spark.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "l4spark"
# the steps of the method and the shared layers, in the order data flows; a module may import its
# own layer and the layers after it, never one before it (cli -> nightly -> steps -> io)
LAYERS = [
    {"cli"},
    {"bench", "evaluation"},
    {"nightly"},
    {"report"},
    {"diagnosis"},
    {"spatial", "temporal"},
    {"crossjob"},
    {"parse"},
    {"simulate"},
    {"io"},
    {"config", "errors", "regexsafety", "regexliteral", "regexcolumns", "killpoints", "__init__"},
]
# typed settings are read by ``l4spark.config`` before Spark starts: these import no Spark and
# nothing of their step beyond other pure modules
PURE = ["config", "errors", "regexsafety", "regexliteral", "spatial.config", "crossjob.config", "crossjob.fingerprint",
        "crossjob.reasons", "temporal.config", "diagnosis.config", "diagnosis.patterns", "parse.textrules",
        "io.delta_jars", "io.fs", "io.maven"]


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts) or "__init__"


def imports_of(path: Path) -> set[str]:
    """l4spark modules ``path`` imports (names relative to the package)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("l4spark"):
            base = node.module[len("l4spark."):] if node.module != "l4spark" else ""
            for alias in node.names:
                child = f"{base}.{alias.name}" if base else alias.name
                found.add(child if (PACKAGE / child.replace(".", "/")).with_suffix(".py").exists()
                          or (PACKAGE / child.replace(".", "/")).is_dir() else base or "__init__")
        elif isinstance(node, ast.Import):
            found |= {a.name[len("l4spark."):] for a in node.names if a.name.startswith("l4spark.")}
    return found


def import_graph() -> dict[str, set[str]]:
    graph = {module_name(p): imports_of(p) for p in PACKAGE.rglob("*.py")}
    # importing a.b.c runs a/__init__ and a/b/__init__ too
    return {m: {d for d in deps if d != m} for m, deps in graph.items()}


def layer(module: str) -> int:
    top = module.split(".")[0]
    return next(i for i, names in enumerate(LAYERS) if top in names)


def test_every_top_level_module_and_folder_has_a_layer():
    tops = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
            if (p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists()))}
    assert tops <= set().union(*LAYERS), sorted(tops - set().union(*LAYERS))


def test_no_import_cycle():
    graph = import_graph()
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                pytest.fail("import cycle: " + " -> ".join(path[path.index(dep):] + [dep]))
            if dep in graph and dep not in state:
                visit(dep)
        path.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)


def test_dependencies_point_one_way():
    """A module imports its own layer or later ones; the one exception is the config loader, which
    builds each step's typed settings from that step's pure settings module."""
    wrong = [f"{m} -> {d}" for m, deps in import_graph().items() for d in deps
             if d.split(".")[0] != m.split(".")[0] and layer(d) < layer(m) and not (m == "config" and d in PURE)]
    assert not wrong, wrong


def test_nothing_imports_the_command_layer():
    wrong = [f"{m} -> {d}" for m, deps in import_graph().items() for d in deps
             if d.split(".")[0] == "cli" and m.split(".")[0] != "cli"]
    assert not wrong, wrong


def test_the_cycle_check_finds_a_cycle(tmp_path, monkeypatch):
    """The checker itself: a two-module cycle in a throw-away package is reported."""
    package = tmp_path / "l4spark"
    (package / "a").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "a" / "__init__.py").write_text("")
    (package / "a" / "one.py").write_text("from l4spark.a.two import x\n")
    (package / "a" / "two.py").write_text("def x():\n    from l4spark.a.one import y\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", package)
    with pytest.raises(pytest.fail.Exception, match="import cycle: a.one -> a.two -> a.one"):
        test_no_import_cycle()


@pytest.mark.parametrize("module", PURE)
def test_settings_and_pure_logic_import_no_spark(module):
    code = (f"import sys, l4spark.{module}\n"
            "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'pandas', 'sklearn'))\n"
            "assert not heavy, heavy\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_pure_scoring_runs_without_pyspark():
    """Event scoring, the spatial signals and ranking, and the settings load with pyspark made unimportable."""
    code = ("import sys; sys.modules['pyspark'] = None\n"
            "import l4spark.diagnosis.scoring, l4spark.spatial.score, l4spark.spatial.signals, l4spark.config\n"
            "l4spark.config.load_config()\n")
    subprocess.run([sys.executable, "-c", code], check=True)


SHARED_OPTIONS = {"--verbose", "--warehouse", "--conf", "--master", "--format", "--lock-wait"}


def _commands(parser, prefix=()):
    """(name, parser) of every leaf command under ``parser``."""
    import argparse

    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not actions:
        yield " ".join(prefix), parser
        return
    for name, sub in actions[0].choices.items():
        yield from _commands(sub, (*prefix, name))


def test_every_command_that_starts_spark_offers_the_shared_options():
    from l4spark.cli import build_parser

    commands = dict(_commands(build_parser()))
    assert set(commands) == {"simulate", "patterns list", "patterns add", "patterns confirm", "spatial",
                             "normal-pool", "diagnose", "evaluate", "nightly", "parse", "sql"}
    for name, parser in commands.items():
        options = {o for a in parser._actions for o in a.option_strings}
        if name == "simulate":  # writes files, starts no Spark and takes no lock
            assert not options & (SHARED_OPTIONS - {"--verbose"}), name
        else:
            assert SHARED_OPTIONS <= options, (name, sorted(SHARED_OPTIONS - options))


def test_every_imported_l4spark_name_exists():
    """Each ``from l4spark.x import name`` in the package, the tests and the jobs names a module or
    an attribute that exists (a move that left a stale import fails here, not at run time)."""
    import importlib

    root = PACKAGE.parent
    missing = []
    for path in [*PACKAGE.rglob("*.py"), *(root / "tests").rglob("*.py"), *(root / "jobs").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if not (isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("l4spark")):
                continue
            module = importlib.import_module(node.module)
            for alias in node.names:
                if not hasattr(module, alias.name):
                    try:
                        importlib.import_module(f"{node.module}.{alias.name}")
                    except ImportError:
                        missing.append(f"{path.relative_to(root)}: from {node.module} import {alias.name}")
    assert not missing, missing
