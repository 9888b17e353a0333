"""The boundaries at run time: parent-side modules never load TensorFlow, and no
module of bench/, reports/ or workloads/ imports another in a circle.

`make lint` checks the import graph statically (import-linter, pyproject.toml);
this imports every parent-side module in a fresh interpreter, which also catches
imports the graph cannot see (importlib, plugins, a library that pulls TF in).
No contract forbids a cycle, so a test does; it reads the imports inside functions
too (where a cycle usually hides):

    .venv/bin/python -m pytest tests/test_boundaries.py -k circle -q
"""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

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


def loaded_by_importing(modules: list[str], packages: tuple[str, ...]) -> list[str]:
    """The modules of ``packages`` loaded by importing ``modules`` in a fresh interpreter."""
    code = ("import importlib, json, sys\n"
            f"for name in {modules!r}:\n"
            "    importlib.import_module(name)\n"
            "print(json.dumps(sorted(m for m in sys.modules\n"
            f"                        if m.split('.')[0] in {packages!r})))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=120, check=True)
    return list(json.loads(out.stdout.strip().splitlines()[-1]))


def test_parent_side_modules_do_not_load_tensorflow() -> None:
    modules = parent_side_modules()
    assert {"bench.launch.launcher", "bench.cli.main", "bench.regress.compare",
            "reports.report", "bench.results.store"} <= set(modules)
    loaded = loaded_by_importing(modules, ("tensorflow", "keras", "jax", "jaxlib"))
    assert loaded == [], f"parent-side imports loaded {loaded[:5]}"


def test_child_side_modules_do_not_load_scipy() -> None:
    # scipy serves the parent's comparisons of runs; in a measured process it would
    # only add import time and host memory to the figures.
    modules = [name for pkg in (bench, workloads)
               for info in pkgutil.walk_packages(pkg.__path__, prefix=pkg.__name__ + ".")
               if (name := info.name).startswith(CHILD_SIDE) and not name.endswith("__main__")]
    assert {"bench.child.main", "bench.child.windows",
            "bench.child.backends.tf.fit"} <= set(modules)
    loaded = loaded_by_importing(modules, ("scipy",))
    assert loaded == [], f"child-side imports loaded {loaded[:5]}"


def test_every_strategy_has_a_child_side_builder() -> None:
    # The two halves of a strategy (traits here, TensorFlow constructor in the child)
    # name the same strategies; read statically so that TensorFlow stays unloaded.
    from bench.strategies import STRATEGIES

    text = (ROOT / "bench" / "child" / "backends" / "tf" / "build.py").read_text(encoding="utf-8")
    built = {line.split('"')[1] for line in text.splitlines()
             if line.startswith("@_register(")}
    assert built == {n for n, f in STRATEGIES.items() if "tf" in f.backends}


def test_every_jax_strategy_has_a_distribution() -> None:
    # The JAX lane's strategies are built by bench.child.backends.jax.distribution.
    from bench.strategies import STRATEGIES

    text = (ROOT / "bench" / "child" / "backends" / "jax" / "distribution.py").read_text(
        encoding="utf-8")
    built = {line.split('"')[1] for line in text.splitlines()
             if line.startswith("DISTRIBUTIONS.register(")}
    assert built == {n for n, f in STRATEGIES.items() if "jax" in f.backends}



def import_cycles(packages: tuple[str, ...] = ("bench", "reports", "workloads")
                  ) -> list[tuple[str, ...]]:
    """Every import of one module by another that closes a circle, as the circle.

    grimp reads every import statement, including those inside functions (the usual
    way to hide a cycle from start-up). Imports under ``if TYPE_CHECKING`` are left
    out: they never run, and the strategy registry's methods are typed with the
    RunSpec whose validation consults the registry.
    """
    import grimp

    graph = grimp.build_graph(*packages, exclude_type_checking_imports=True, cache_dir=None)
    cycles = []
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back is not None:
                cycles.append((importer, *back))
    return cycles


def test_no_module_imports_another_in_a_circle() -> None:
    cycles = import_cycles()
    assert cycles == [], "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_the_cycle_check_counts_imports_inside_functions(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    pkg = tmp_path / "cyclic"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("", encoding="utf-8")
    (pkg / "a.py").write_text("import cyclic.b\n", encoding="utf-8")
    (pkg / "b.py").write_text("def f():\n    from cyclic import a\n    return a\n",
                              encoding="utf-8")
    # An import for type checking only never runs: c and d are no cycle.
    (pkg / "c.py").write_text("import cyclic.d\n", encoding="utf-8")
    (pkg / "d.py").write_text("from typing import TYPE_CHECKING\n\n"
                              "if TYPE_CHECKING:\n    import cyclic.c\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert import_cycles(("cyclic",)) == [("cyclic.a", "cyclic.b", "cyclic.a"),
                                          ("cyclic.b", "cyclic.a", "cyclic.b")]
