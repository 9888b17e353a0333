"""The process boundary at run time: parent-side modules never load TensorFlow.

`make lint` checks the import graph statically (import-linter, pyproject.toml);
this imports every parent-side module in a fresh interpreter, which also catches
imports the graph cannot see (importlib, plugins, a library that pulls TF in).
"""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import bench
import reports
import workloads

ROOT = Path(__file__).resolve().parent.parent
CHILD_SIDE = ("bench.child", "workloads.models", "workloads.flops")


def parent_side_modules() -> list[str]:
    names = []
    for pkg in (bench, reports, workloads):
        names.append(pkg.__name__)
        for info in pkgutil.walk_packages(pkg.__path__, prefix=pkg.__name__ + "."):
            if not info.name.startswith(CHILD_SIDE) and not info.name.endswith("__main__"):
                names.append(info.name)
    return sorted(names)


def test_parent_side_modules_do_not_load_tensorflow() -> None:
    modules = parent_side_modules()
    assert {"bench.launch.launcher", "bench.cli.main", "bench.regress.compare",
            "reports.report", "bench.results.store"} <= set(modules)
    code = ("import importlib, json, sys\n"
            f"for name in {modules!r}:\n"
            "    importlib.import_module(name)\n"
            "print(json.dumps(sorted(m for m in sys.modules\n"
            "                        if m.split('.')[0] in ('tensorflow', 'keras'))))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=120, check=True)
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert loaded == [], f"parent-side imports loaded {loaded[:5]}"


def test_child_side_modules_do_not_load_scipy() -> None:
    # scipy serves the parent's comparisons of runs; in a measured process it would
    # only add import time and host memory to the figures.
    modules = [name for pkg in (bench, workloads)
               for info in pkgutil.walk_packages(pkg.__path__, prefix=pkg.__name__ + ".")
               if (name := info.name).startswith(CHILD_SIDE) and not name.endswith("__main__")]
    assert {"bench.child.main", "bench.child.windows", "bench.child.fit"} <= set(modules)
    code = ("import importlib, json, sys\n"
            f"for name in {modules!r}:\n"
            "    importlib.import_module(name)\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'scipy')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=120, check=True)
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert loaded == [], f"child-side imports loaded {loaded[:5]}"


def test_every_strategy_has_a_child_side_builder() -> None:
    # The two halves of a strategy (traits here, TensorFlow constructor in the child)
    # name the same strategies; read statically so that TensorFlow stays unloaded.
    from bench.strategies import STRATEGIES

    text = (ROOT / "bench" / "child" / "build.py").read_text(encoding="utf-8")
    built = {line.split('"')[1] for line in text.splitlines()
             if line.startswith("@_register(")}
    assert built == set(STRATEGIES.names())
