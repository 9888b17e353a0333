"""What an answer is worth, in one sentence: the bounds of ``bench.answers.worth``.

Every rendering leads an answer with it: "use default on 1 device: no configuration is
shown faster; none is more than 4% faster (95%, its 3 comparisons together)".
"""

from __future__ import annotations

from bench.answers.worth import Worth


def worth_sentence(w: Worth) -> str:
    """``use central_storage on 2 devices: faster than every other configuration by
    at least 2% (95%, all its comparisons together)``; where the look that settled it
    read fewer runs than are stored, how many it did not read."""
    return _claim(w) + (f" (as settled: {w.unread} later run{'s' * (w.unread != 1)} of "
                        f"this place not read)" if w.unread else "")


def _claim(w: Worth) -> str:
    head = f"use {w.answer}" if w.settled else f"{w.answer} for now"
    if w.comparisons == 0 and not w.unmeasured:
        return f"{head}: the only configuration measured here"
    joint = (f"({w.level:.0%}, its {w.comparisons} comparisons together)"
             if w.comparisons > 1 else f"({w.level:.0%})")
    if w.gain is not None and w.gain > 0 and not w.unmeasured:
        return (f"{head}: faster than every other configuration by at least "
                f"{_pct(w.gain)} {joint}")
    parts = [f"{head}: no configuration is shown faster"]
    if w.loss is not None:
        parts.append(f"none is more than {_pct(max(w.loss, 0.0))} faster {joint}")
    if w.unmeasured:
        parts.append(f"not bounded against {', '.join(w.unmeasured)} (one run, "
                     f"no noise measured)")
    return "; ".join(parts)


def _pct(x: float) -> str:
    return f"{x:.0%}" if x >= 0.01 else f"{x:.1%}"


