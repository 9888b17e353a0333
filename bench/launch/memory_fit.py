"""For an ``oom`` result: the largest batch of the same configuration that did fit.

"Same configuration" means every identity field of the spec equal except the batch
size, so a user sees at once how far below the failing batch the limit lies.
"""

from __future__ import annotations

from collections.abc import Iterable

from bench.results.schema import RunResult
from bench.spec import RunSpec

_IGNORED = ("batch", "timeout_s")


def _without_batch(spec: RunSpec) -> dict[str, object]:
    return {k: v for k, v in spec.to_dict().items() if k not in _IGNORED}


def largest_fit(spec: RunSpec, results: Iterable[RunResult]) -> RunResult | None:
    """The ``ok`` result with the largest global batch among ``spec``'s siblings."""
    target = _without_batch(spec)
    fits = [r for r in results
            if r.status == "ok" and _without_batch(r.spec) == target]
    return max(fits, key=lambda r: r.global_batch, default=None)


def note_largest_fit(result: RunResult, results: Iterable[RunResult]) -> RunResult:
    """Append the largest fitting batch to an ``oom`` result's reason (others unchanged)."""
    if result.status != "oom":
        return result
    fit = largest_fit(result.spec, results)
    note = (f"largest batch of this configuration that fit in this sweep: global batch "
            f"{fit.global_batch} ({fit.per_replica_batch} per replica)" if fit is not None
            else "no smaller batch of this configuration has a result in this sweep")
    result.reason = f"{note}\n{result.reason or ''}".rstrip()
    return result
