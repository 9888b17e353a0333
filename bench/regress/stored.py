"""The stored runs ``bench compare`` pools a configuration's run-to-run noise with.

Apart from ``bench.regress.pooling`` because it reads the history store, which itself
imports the comparison (``bench.regress.compare``) that pooling serves.
"""

from __future__ import annotations

from collections.abc import Mapping

from bench.env import stored_machine_id
from bench.regress.history import History, Selection
from bench.regress.options import HISTORY_SWEEPS
from bench.regress.pooling import Grouped


def load_history(history: History, configs: Mapping[str, Grouped], *,
                 sweeps: int = HISTORY_SWEEPS) -> dict[str, Grouped]:
    """Each configuration's stored successful runs on the machine(s) of its runs in
    ``configs`` (the baseline's), from its newest ``sweeps`` sweeps, with their sweep id."""
    out: dict[str, Grouped] = {}
    for key, given in configs.items():
        machines = sorted({m for r, _ in given if (m := stored_machine_id(r.environment or {}))})
        found: Grouped = []
        for machine in machines:
            results, ids, _ = history.results_by_sweep(
                Selection({"key": key, "machine": machine, "status": "ok"}))
            newest = set(list(dict.fromkeys(ids))[-sweeps:])  # rows come oldest first
            # The selection's key matches a prefix (with SQL wildcards): exact keys only.
            found += [(r, s) for r, s in zip(results, ids, strict=True)
                      if s in newest and r.spec.key() == key]
        out[key] = found
    return out
