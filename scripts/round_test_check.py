"""Could fewer, longer sessions settle answers? Three tests of a place's mean log ratio,
one look, by seeded simulation.

    .venv/bin/python -m scripts.round_test_check [--alpha 0.01] [--trials 200000]

A sweep's session start-ups (import, every arm's build, first call, warm-up) can take a
quarter of its time on a 2-core machine (142 s of 570): fewer sessions with more rounds
each would measure more. A test on session means (df = sessions - 1) settles
less from two sessions of 20 rounds than from four of 10. The tests compared:

- ``sessions``: a t test on the place's own session means, df S - 1. The sweep's
  answers also borrow a pooled pair variance (``bench.answers.noise``, guarded by an F test)
  where it has more df; this check leaves that out of all three tests;
- ``floored``: the variance of the mean is the larger of the sessions' and what the
  rounds predict (within-session variance / (S R)), with the rounds' df S (R - 1) where
  the rounds' is larger;
- ``guarded``: as ``floored``, but the rounds' prediction is multiplied by an upper 95%
  bound of the workload's session-noise ratio, estimated from ``df_pool`` degrees of
  freedom of the sweep's other places (``scripts.session_noise`` prints that ratio and
  its df).

Model: d_sr = gap + b_s + e_sr, b_s ~ N(0, tau2), e_sr ~ N(0, 1); the session-noise
ratio is (tau2 + 1/R) / (1/R), 1 where sessions add nothing to their rounds. The pooled
ratio estimate is ratio * chi2(df_pool) / df_pool: one ratio for every place of a
workload is this check's assumption. One look only: the budget's alpha-spending plan
(``scripts.sequential_check``) is not simulated here.

Prints figures only (no TensorFlow); exit 0.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import numpy as np
from scipy import stats

from bench.results.stats.settlement import (
    ROUNDS_MAX_SESSIONS,
    SESSION_RATIO_LEVEL,
    SESSION_RATIO_MIN_DF,
)

TESTS = ("sessions", "floored", "guarded")
RATIOS = (1.0, 1.5, 2.0, 4.0, 6.6)  # 6.6: ResNet50's on 2 cores (scripts.session_noise)
DESIGNS = ((2, 10), (3, 10), (4, 10), (2, 20), (3, 20))


def rates(sessions: int, rounds: int, ratio: float, gap: float, *, alpha: float,
          df_pool: int, trials: int, seed: int = 0) -> dict[str, float]:
    """How often each test rejects "no difference" at two-sided ``alpha``, for a true
    ``gap`` in units of a round's SD (0: the type-I error)."""
    if sessions < 2 or rounds < 2 or ratio < 1 or df_pool < 1:
        raise ValueError(f"needs sessions >= 2, rounds >= 2, ratio >= 1 and df_pool >= 1. "
                         f"Received: sessions={sessions}, rounds={rounds}, ratio={ratio}, "
                         f"df_pool={df_pool}")
    rng = np.random.default_rng(seed)
    tau = np.sqrt((ratio - 1) / rounds)
    d = (gap + rng.normal(0.0, tau, (trials, sessions, 1))
         + rng.normal(0.0, 1.0, (trials, sessions, rounds)))
    means = d.mean(axis=2)
    mean = means.mean(axis=1)
    between = means.var(axis=1, ddof=1) / sessions
    within = d.var(axis=2, ddof=1).mean(axis=1) / (sessions * rounds)
    t_sessions = stats.t.ppf(1 - alpha / 2, sessions - 1)
    t_rounds = stats.t.ppf(1 - alpha / 2, sessions * (rounds - 1))
    estimate = ratio * rng.chisquare(df_pool, trials) / df_pool
    bound = np.maximum(1.0, estimate * df_pool / stats.chi2.ppf(0.05, df_pool))
    out = {"sessions": float(np.mean(np.abs(mean) / np.sqrt(between) > t_sessions))}
    for name, rounds_var in (("floored", within), ("guarded", bound * within)):
        by_sessions = between >= rounds_var
        var = np.where(by_sessions, between, rounds_var)
        crit = np.where(by_sessions, t_sessions, t_rounds)
        out[name] = float(np.mean(np.abs(mean) / np.sqrt(var) > crit))
    return out


def plan_rates(target_ratio: float, other_ratio: float, gap: float, *, rounds: int,
               looks: Sequence[tuple[int, float]], others: int, trials: int,
               seed: int = 0) -> dict[str, float]:
    """How often each test rejects "no difference" at any look of a sequential plan.

    Each look ``(sessions, alpha)`` reads the target place after that many sessions.
    The guarded test's session-noise ratio is pooled at each look from every place
    (the target and ``others`` places, each with as many sessions so far, one
    comparison each): sum of between-session sums of squares over the sum of their
    df times the rounds' prediction, read as ``stats.settlement.RoundsEvidence`` reads it
    (``guarded``: the target's own sessions where their variance is the larger). The
    session's statistic is its rounds' median. The target's ratio may differ from the others'
    (``target_ratio`` against ``other_ratio``): the pool's assumption broken. ``pooled``
    is the sweep's pooled pair variance borrowed where the target's own is not larger
    (the guard of ``stats.spread.guarded_pool`` left out: it shows what borrowing buys and
    costs where the F test cannot tell the groups apart)."""
    rng = np.random.default_rng(seed)
    sessions = max(s for s, _ in looks)
    ratios = np.array([target_ratio] + [other_ratio] * others)
    tau = np.sqrt((ratios - 1) / rounds)[None, :, None, None]
    d = (gap * (np.arange(len(ratios)) == 0)[None, :, None, None]
         + tau * rng.normal(0.0, 1.0, (trials, len(ratios), sessions, 1))
         + rng.normal(0.0, 1.0, (trials, len(ratios), sessions, rounds)))
    # A session's statistic is the median of its rounds and its rounds predict pi/2 x
    # their variance / rounds for it, as bench.results.pairs reads a session.
    means = np.median(d, axis=3)  # trials x places x sessions
    predicted = np.pi / 2 * d.var(axis=3, ddof=1) / rounds
    rejected = {t: np.zeros(trials, dtype=bool) for t in ("sessions", "pooled", "guarded")}
    for s, alpha in looks:
        m = means[:, :, :s]
        ss = ((m - m.mean(axis=2, keepdims=True)) ** 2).sum(axis=2)  # trials x places
        own = ss[:, 0] / (s - 1) / s  # the target mean's variance, its own sessions
        mean = m[:, 0].mean(axis=1)
        pool_df = len(ratios) * (s - 1)
        pooled = ss.sum(axis=1) / pool_df / s
        ratio = ss.sum(axis=1) / pool_df / predicted[:, :, :s].mean(axis=(1, 2))
        # As stats.SessionRatio.bound and RoundsEvidence.var: no floor, and no guard
        # from fewer than SESSION_RATIO_MIN_DF df nor past ROUNDS_MAX_SESSIONS sessions
        # (the target keeps its own sessions).
        bound = ratio * pool_df / stats.chi2.ppf(1 - SESSION_RATIO_LEVEL, pool_df)
        if pool_df < SESSION_RATIO_MIN_DF or s > ROUNDS_MAX_SESSIONS:
            bound = np.zeros(trials)  # a guard of nought: its own sessions decide
        guard = bound * predicted[:, 0, :s].mean(axis=1) / s
        t_own = stats.t.ppf(1 - alpha / 2, s - 1)
        t_pool = stats.t.ppf(1 - alpha / 2, pool_df)
        t_rounds = stats.t.ppf(1 - alpha / 2, s * (rounds - 1))
        z = np.abs(mean)
        rejected["sessions"] |= z > t_own * np.sqrt(own)
        borrow = own <= pooled
        rejected["pooled"] |= np.where(borrow, z > t_pool * np.sqrt(pooled),
                                       z > t_own * np.sqrt(own))
        by_own = own >= guard
        rejected["guarded"] |= np.where(by_own, z > t_own * np.sqrt(own),
                                        z > t_rounds * np.sqrt(guard))
    return {t: float(r.mean()) for t, r in rejected.items()}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--alpha", type=float, default=0.01)
    parser.add_argument("--trials", type=int, default=200_000)
    parser.add_argument("--df-pool", type=int, default=8,
                        help="df of the pooled session-noise ratio (7-28 in 10-minute sweeps)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plan", action="store_true",
                        help="also the sequential plan's looks (plan_rates)")
    args = parser.parse_args(argv)
    if not 0 < args.alpha < 1 or args.trials < 100:
        print(f"needs 0 < --alpha < 1 and --trials >= 100. Received: --alpha {args.alpha}, "
              f"--trials {args.trials}", file=sys.stderr)
        return 2
    kw = {"alpha": args.alpha, "df_pool": args.df_pool, "trials": args.trials,
          "seed": args.seed}
    print(f"type-I error at alpha {args.alpha} (one look, {args.trials:,} trials, "
          f"pooled ratio df {args.df_pool}):")
    print("design   ratio  " + "  ".join(f"{t:>9}" for t in TESTS))
    for s, r in DESIGNS:
        for ratio in RATIOS:
            got = rates(s, r, ratio, 0.0, **kw)
            print(f"{s} x {r:<3}  {ratio:5.1f}  " + "  ".join(f"{got[t]:9.4f}" for t in TESTS))
    # A 3% gap at a round's 3.6% SD: the MLP and CNN places of the CPU preset.
    print("power at a 3% gap, round SD 3.6%, sessions adding nothing (ratio 1):")
    for s, r in DESIGNS:
        got = rates(s, r, 1.0, 3.0 / 3.6, **kw)
        print(f"{s} x {r:<3}  " + "  ".join(f"{t} {got[t]:.3f}" for t in TESTS))
    if args.plan:
        plan_section(args)
    return 0


# LookPlan.for_budget(570): 3 interim looks at 0.0033, the last at 0.04. The whole plan
# from a place's second session, and what a 10-minute sweep gives most places: two
# sessions, read at an interim look and at the last.
PLANS = {"2-5 sessions": ((2, 0.0033), (3, 0.0033), (4, 0.0033), (5, 0.04)),
         "2 sessions": ((2, 0.0033), (2, 0.04))}
PLAN_CASES = ((1.5, 1.5), (1.0, 1.0), (3.0, 1.5), (6.6, 1.5), (6.6, 6.6))


def plan_section(args: argparse.Namespace) -> None:
    """Print the sequential plans' error rates and power (``plan_rates``)."""
    trials = max(100, args.trials // 10)
    print(f"\nsequential plans, target + 4 places pooled, {trials:,} trials; "
          f"gap 0: type-I error, else power")
    print("plan           rounds  target/other ratio  gap    sessions    pooled   guarded")
    for name, looks in PLANS.items():
        for rounds in (10, 20):
            for target, other in PLAN_CASES:
                for gap in (0.0, 3.0 / 3.6):
                    got = plan_rates(target, other, gap, rounds=rounds, looks=looks,
                                     others=4, trials=trials, seed=args.seed)
                    print(f"{name:13s}  {rounds:>6}  {target:6.1f} / {other:<9.1f}  {gap:4.2f}  "
                          + "  ".join(f"{got[t]:9.4f}"
                                      for t in ("sessions", "pooled", "guarded")))


if __name__ == "__main__":
    sys.exit(main())
