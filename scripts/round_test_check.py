"""Could fewer, longer sessions settle answers? Three tests of a place's mean log ratio,
one look, by seeded simulation.

    .venv/bin/python -m scripts.round_test_check [--alpha 0.01] [--trials 200000]

A sweep's session start-ups (import, every arm's build, first call, warm-up) were a
quarter of its time on the 2-core machine (b48b: 142 s of 570): fewer sessions with more
rounds each would measure more. A test on session means (df = sessions - 1) settles
less from two sessions of 20 rounds than from four of 10. The tests compared:

- ``sessions``: a t test on the place's own session means, df S - 1. The sweep's
  answers also borrow a pooled pair variance (``reports.noise``, guarded by an F test)
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

TESTS = ("sessions", "floored", "guarded")
RATIOS = (1.0, 1.5, 2.0, 4.0, 6.6)  # 6.6: ResNet50 in b48a-c (scripts.session_noise)
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--alpha", type=float, default=0.01)
    parser.add_argument("--trials", type=int, default=200_000)
    parser.add_argument("--df-pool", type=int, default=8,
                        help="df of the pooled session-noise ratio (b48a-c: 7-28)")
    parser.add_argument("--seed", type=int, default=0)
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
