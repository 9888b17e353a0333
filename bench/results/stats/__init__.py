"""Statistics of measured figures: numpy, and scipy for every distribution.

One module per concern, each importing only those above it in this list:
``distributions`` (the t, F and chi-squared distributions, Holm, Welch-Satterthwaite),
``spread`` (run-level noise as evidence, the guarded pool), ``runs`` (one group of
runs, the hierarchical bootstrap), ``paired`` (paired ratios, TOST), ``power``
(planning: detectable changes, runs and pairs to settle), ``comparison`` (two groups
of runs: ``compare_runs``) and ``settlement`` (one answer between two configurations).
Callers import from the module that defines a name.

The distributions, tests and resampling are scipy's (the t, noncentral t and F
distributions through ``scipy.special``, the functions ``scipy.stats`` evaluates them
with; ``bootstrap``), the library every reviewer of statistics already trusts; what
is written here is only how benchmark runs map onto them. Parent
side only: the child summarises its own samples with ``bench.results.samples``.

Comparisons of *runs*. A run (one process) is the unit of replication: its
windows share the process's conditions (load, memory layout, thread placement),
so they describe how precisely that one run was measured, not how much another
run of the same code would differ. Each run contributes one figure (the median
of its windows); a group of runs is summarised by ``summarize_runs``; two groups
are compared by ``compare_runs`` (the decision: interval, p-value and minimum
detectable change from the measured run-to-run noise) or, for a distribution-
free interval with many runs a side, ``hierarchical_bootstrap_ratio``.
``minimum_detectable_change`` plans how many runs a given noise needs.

Comparisons of *pairs* (a baseline and a current figure measured under the same
conditions, e.g. back to back): ``paired_log_ratio`` (the ratio with a paired t
and a bootstrap interval), ``paired_equivalence`` (TOST: is the change shown to
be within +-margin?) and ``pairs_for_equivalence`` (how many pairs settle a
margin at a given noise; ``equivalence_power`` the other way round).

Everything is computed on the log scale, where a ratio is a difference and a
slowdown and the matching throughput loss are the same number seen both ways up.
Inputs are "runs": a sequence of runs, each a sequence of positive window values,
or two sequences of positive figures, one value a pair on each side.
"""
