"""Why one configuration is slower than another: the difference of their profiled steps.

In a report, "because" is followed only by this: measured evidence from both
configurations' profiles, the step-time difference attributed to the parts of the
step (input, compute, communication, host, idle) and to the op types that added the
most time, with the profiles' paths and the command that opens them. A strategy's
description from the registry may say what a strategy does; it never stands in as
the cause.

The attribution is per step when both configurations process the same examples per
step, else per 1,000 examples (a step of one is then not a step of the other). Parts
that took less time in the slower configuration are named too ("offset by"), so the
shares of the parts that grew can exceed 100% of the difference.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bench.answers.configs import ConfigView
from bench.results.text import tensorboard_command
from reports.breakdown import Profiled, common_dir, profiled

# A part is named in the sentence when it changed by at least this share of the
# difference (smaller changes are within what a few profiled steps can resolve).
PART_SHOWN = 0.05
# Op types named per part: those that grew most, each by at least this share of the part's.
OPS_SHOWN, OP_SHOWN = 2, 0.10
# Shares of the difference are given while the parts that grew add up to at most this
# many times it (else they mostly cancel out, and ms say more than shares).
OFFSET_LIMIT = 1.5
PER_EXAMPLES = 1000  # the unit when the configurations' steps hold different examples
UNSPLIT = "input, host and idle"  # results profiled before the five parts existed


@dataclass(frozen=True)
class PartChange:
    """How much one part of the step grew (negative: shrank), and the ops behind it."""

    part: str
    delta_s: float
    ops: tuple[tuple[str, float], ...] = ()  # (op type, growth), largest first


@dataclass(frozen=True)
class Difference:
    """The slower configuration's profiled step against the faster one's."""

    slower: Profiled
    faster: Profiled
    scale: float  # slower's seconds x scale and faster's x scale_faster are per unit
    scale_faster: float
    changes: tuple[PartChange, ...]  # every part, largest growth first

    @property
    def unit(self) -> str:
        return "step" if self.scale == self.scale_faster == 1.0 else \
            f"{PER_EXAMPLES:,} examples"

    @property
    def slower_s(self) -> float:
        return self.slower.step_s * self.scale

    @property
    def faster_s(self) -> float:
        return self.faster.step_s * self.scale_faster

    @property
    def delta_s(self) -> float:
        return self.slower_s - self.faster_s

    @property
    def reproduced(self) -> bool:
        """The profiled steps show the slower configuration slower: the parts then
        attribute a difference that exists in the profiles too."""
        return self.delta_s > 0

    def attribution(self) -> str:
        """``+9.6 ms/step profiled (24.4 vs 14.8 ms): 61% communication (+5.9 ms, of
        which CollectiveReduceV2 +5.1 ms), 22% host (+2.1 ms, ...); offset by idle
        -0.2 ms``. Where the parts that grew add up to far more than the difference
        (large changes that cancel out), shares of it would mislead: each part's change
        is given in ms instead."""
        total = self.delta_s
        # Parts are named when they moved by a visible amount: a share of the difference,
        # or of the step where the difference itself is small.
        floor = PART_SHOWN * max(abs(total), PART_SHOWN * self.faster_s)
        grew = [c for c in self.changes if c.delta_s > 0 and c.delta_s >= floor]
        shrank = [c for c in self.changes if c.delta_s < 0 and -c.delta_s >= floor]
        as_shares = total > 0 and sum(c.delta_s for c in grew) <= OFFSET_LIMIT * total
        parts = []
        for c in grew:
            ops = ", ".join(f"{name} +{_ms(d)} ms" for name, d in c.ops)
            which = f"of which {ops}" if ops else ""
            if as_shares:
                parts.append(f"{c.delta_s / total:.0%} {c.part} (+{_ms(c.delta_s)} ms"
                             f"{f', {which}' if ops else ''})")
            else:
                parts.append(f"{c.part} +{_ms(c.delta_s)} ms{f' ({which})' if ops else ''}")
        text = (f"{'+' if total >= 0 else ''}{_ms(total)} ms/{self.unit} profiled "
                f"({_ms(self.slower_s)} vs {_ms(self.faster_s)} ms): "
                f"{', '.join(parts) or 'no single part'}")
        if shrank:
            text += "; offset by " + ", ".join(f"{c.part} {_ms(c.delta_s)} ms" for c in shrank)
        return text

    @property
    def profiles(self) -> str:
        """Where the two configurations' profiles are, and what opens them together."""
        dirs = [*self.slower.dirs, *self.faster.dirs]
        if not dirs:
            return "profile directories not recorded"
        return (f"profiles: {', '.join(dirs)}; open them with: "
                f"{tensorboard_command(common_dir(dirs))}")

    def because(self) -> str:
        """The evidence after "because" (only where ``reproduced``)."""
        return f"{self.attribution()} ({self.profiles})"

    def headline(self) -> str:
        """``+7.1 ms/step: communication +5.9 ms (CollectiveReduceV2)``: the difference,
        the part that grew most and its largest op, the one line a report's summary
        table has room for (the whole attribution stays in ``because``)."""
        head = f"+{_ms(self.delta_s)} ms/{self.unit}"
        top = self.changes[0] if self.changes and self.changes[0].delta_s > 0 else None
        if top is None:
            return f"{head}: no single part"
        op = f" ({top.ops[0][0]})" if top.ops else ""
        return f"{head}: {top.part} +{_ms(top.delta_s)} ms{op}"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g}"


def _parts(p: Profiled, fold: bool) -> dict[str, float]:
    """Seconds per part; ``fold`` merges input, host and idle (to meet a legacy side)."""
    if p.unsplit_s is not None:
        return {**p.parts, UNSPLIT: p.unsplit_s}
    if not fold:
        return dict(p.parts)
    rest = sum(p.parts.get(k, 0.0) for k in ("input", "host", "idle"))
    return {"compute": p.parts["compute"], "communication": p.parts["communication"],
            UNSPLIT: rest}


def difference(slower: ConfigView, faster: ConfigView) -> Difference | None:
    """``slower``'s profiled step against ``faster``'s; None unless both were profiled."""
    a, b = profiled(slower), profiled(faster)
    if a is None or b is None:
        return None
    same = a.examples_per_step == b.examples_per_step
    sa = 1.0 if same else PER_EXAMPLES / a.examples_per_step
    sb = 1.0 if same else PER_EXAMPLES / b.examples_per_step
    fold = a.unsplit_s is not None or b.unsplit_s is not None
    pa, pb = _parts(a, fold), _parts(b, fold)
    changes = []
    for part in pa:
        delta = pa[part] * sa - pb.get(part, 0.0) * sb
        ops_a, ops_b = a.ops.get(part, {}), b.ops.get(part, {})
        grown = sorted(((name, ops_a.get(name, 0.0) * sa - ops_b.get(name, 0.0) * sb)
                        for name in {*ops_a, *ops_b}), key=lambda kv: -kv[1])
        named = tuple((n, d) for n, d in grown[:OPS_SHOWN] if d > 0 and d >= OP_SHOWN * delta)
        changes.append(PartChange(part, delta, named if delta > 0 else ()))
    changes.sort(key=lambda c: -c.delta_s)
    return Difference(a, b, sa, sb, tuple(changes))


def because(slower: ConfigView, faster: ConfigView) -> str | None:
    """The measured cause of ``slower`` being slower than ``faster`` (the text after
    "because"), or None where the profiles cannot give it."""
    d = difference(slower, faster)
    return d.because() if d is not None and d.reproduced else None


def because_line(slower: ConfigView, faster: ConfigView) -> str | None:
    """``because``'s one-line headline (``Difference.headline``), or None where the
    profiles cannot give a cause."""
    d = difference(slower, faster)
    return d.headline() if d is not None and d.reproduced else None


# What ``Difference.profiles`` puts in a sentence: after " (" (a cause in brackets) or
# after "; " (inside a bracket that goes on being closed). Renderings that link the
# paths take them out of the sentence with ``split_profiles``.
_PROFILES = re.compile(r"(?P<lead> \(|; )profiles: (?P<dirs>[^;()]*); open them with: "
                       r"(?P<command>[^()]*)\)")


def split_profiles(text: str) -> tuple[str, list[str]]:
    """``text`` without the profiles' paths and commands ``Difference.profiles`` wrote
    into it, and those paths in order (each once): a rendering links them apart."""
    dirs: list[str] = []

    def cut(m: re.Match[str]) -> str:
        dirs.extend(d for d in m["dirs"].split(", ") if d and d not in dirs)
        return "" if m["lead"] == " (" else ")"

    return _PROFILES.sub(cut, text), dirs


def compared(a: ConfigView, b: ConfigView) -> str | None:
    """The profiled difference of a pair the runs do not call apart (or whose order the
    profiles reverse), whichever side the profiles show slower: ``mirrored on 2 devices
    +1.2 ms/step profiled (...) over one_device on 1 device``; None without both
    profiles."""
    d = difference(a, b)
    if d is None:
        return None
    if not d.reproduced:
        d = difference(b, a)
        assert d is not None  # both were profiled
    if d.delta_s == 0:
        return (f"{a.choice} and {b.choice} profiled alike ({_ms(d.slower_s)} ms per "
                f"{d.unit}; {d.profiles})")
    return (f"{d.slower.config.choice} {d.attribution()} over {d.faster.config.choice} "
            f"({d.profiles})")


def why_not(slower: ConfigView, faster: ConfigView) -> str:
    """Why no cause is given for this pair: a profile is missing, or the profiles do
    not show the difference."""
    d = difference(slower, faster)
    if d is not None and not d.reproduced:
        return (f"cause not measured: the profiled steps do not show the difference "
                f"({_ms(d.slower_s)} vs {_ms(d.faster_s)} ms per {d.unit}; {d.profiles})")
    missing = [c.choice for c in (slower, faster) if profiled(c) is None]
    return (f"cause not measured: no profile of {' or '.join(missing)} (a sweep profiles "
            f"each configuration unless --no-profile; --profile-steps N profiles every run)")
