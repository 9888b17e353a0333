"""Several configurations in one process with interleaved windows (bench.child.arms)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from bench.child.arms import planned_builds, rebuild_pays
from bench.child.windows import REWARM_SHARE, rewarms
from bench.launch.arms import ArmsError, check_arms, run_interleaved
from bench.matrix import block_rounds, round_orders
from bench.results.schema import RunResult
from bench.spec import RunSpec

TINY = {"size": "tiny", "max_seconds": 0.2, "min_steps": 3, "max_steps": 10,
        "warmup_steps": 1}


@pytest.mark.parametrize("arms,rounds", [(2, 6), (3, 6), (4, 5), (2, 1)])
def test_each_arm_holds_mirrored_positions_over_each_pair_of_rounds(arms: int,
                                                                    rounds: int) -> None:
    orders = round_orders(arms, rounds, random.Random(7))
    assert len(orders) == rounds
    assert all(sorted(o) == list(range(arms)) for o in orders)
    for first, second in zip(orders[::2], orders[1::2], strict=False):
        assert second == first[::-1]
    positions = {a: sum(o.index(a) for o in orders[:rounds - rounds % 2])
                 for a in range(arms)}
    assert len(set(positions.values())) == 1  # every arm's mean position is the same


def test_the_orders_differ_between_seeds() -> None:
    seen = {tuple(map(tuple, round_orders(3, 4, random.Random(s)))) for s in range(20)}
    assert len(seen) > 1


@pytest.mark.parametrize("change,why", [
    ({"strategy": "multi_worker_mirrored", "devices": 2}, "runs 2 processes"),
    ({"loop": "fit"}, "only the custom loop"),
    ({"profile_steps": 2}, "profile is taken in the configuration's own process"),
])
def test_configurations_that_cannot_share_a_process_are_refused_by_name(
        change: dict[str, object], why: str) -> None:
    ok = RunSpec(workload="mlp", strategy="one_device", devices=1, batch=16, **TINY)
    bad = ok.replace(**change)
    with pytest.raises(ArmsError, match=why):
        check_arms([ok, bad])
    check_arms([ok, ok.replace(strategy="mirrored", devices=2)])  # these may share


def test_mixed_keras_lanes_cannot_share_a_process() -> None:
    ok = RunSpec(workload="mlp", strategy="one_device", devices=1, batch=16, **TINY)
    with pytest.raises(ArmsError, match="one backend and Keras lane"):
        check_arms([ok, ok.replace(keras=2)])


ONE = RunSpec(workload="mlp", strategy="one_device", devices=1, batch=16, **TINY)
TWO = ONE.replace(strategy="mirrored", devices=2)
FOUR = TWO.replace(devices=4)
# Rebuilding forced (any cost pays), then refused (none does).
FORCED, REFUSED = 1e9, 0.0


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[RunResult]]:
    """One arms process (each costs seconds of TensorFlow start-up) that three tests
    read: ONE, TWO and FOUR in 6 interleaved rounds, in 3 blocks with rebuilding
    forced, the first arm profiled after every arm's windows (a sweep's evidence).

    Mirrored arms on 2 and 4 devices share it, the second Mirrored built on another
    device count (and rebuilt twice) as the old two-arm case had them.
    """
    tmp = tmp_path_factory.mktemp("rebuilt")
    results = run_interleaved([ONE, TWO, FOUR], tmp / "arms.log", rounds=6, seed=1, builds=3,
                              rebuild_share=FORCED, profile_dirs=[tmp / "prof", None, None],
                              profile_steps=2)
    return tmp, results


@pytest.fixture(scope="module")
def kept(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[RunResult]]:
    """ONE and TWO in 6 rounds asked for 3 blocks, rebuilding refused: one build."""
    tmp = tmp_path_factory.mktemp("kept")
    results = run_interleaved([ONE, TWO], tmp / "arms.log", rounds=6, seed=1, builds=3,
                              rebuild_share=REFUSED)
    return tmp, results


def test_arms_are_measured_in_alternating_rounds_in_one_process(
        rebuilt: tuple[Path, list[RunResult]]) -> None:
    """Arms share one process and one session, each round of every arm ends before the
    next round of any starts, only the arm asked is profiled (into its directory),
    and each arm's memory figure is its own share of the shared allocator."""
    tmp_path, results = rebuilt
    assert [r.status for r in results] == ["ok", "ok", "ok"], [r.reason for r in results]
    profiled, *plain = (r.figures.breakdown if r.figures else None for r in results)
    assert profiled is not None and plain == [None, None]
    assert profiled.profiled_steps == 2
    assert Path(profiled.profile_dir).is_relative_to((tmp_path / "prof").resolve())
    sessions = {r.interleaved.session for r in results if r.interleaved}
    assert len(sessions) == 1
    assert [r.interleaved.arm for r in results if r.interleaved] == [0, 1, 2]
    pids = {r.launcher["tasks"][0]["pid"] for r in results}
    assert len(pids) == 1  # one process measured every arm
    windows = [r.figures.windows for r in results if r.figures]
    assert [len(w) for w in windows] == [6, 6, 6]
    # Round r of every arm ends before round r + 1 of any arm starts.
    for r in range(5):
        assert max(w[r].end_ts for w in windows) <= min(w[r + 1].start_ts for w in windows)
    assert [r.replicas for r in results] == [1, 2, 4]
    for r in results:
        assert r.figures is not None
        # Each arm's own share of the shared allocator (this machine's CPU allocator
        # keeps statistics: the launcher sets TF_CPU_ALLOCATOR_USE_BFC).
        assert r.figures.memory.device_scope == "arm"
        assert r.figures.memory.device_peak_reason is None
        assert max(r.figures.memory.device_peak_bytes.values()) > 0
        assert r.figures.memory.host_peak_rss_bytes is None


@pytest.mark.parametrize("rounds,builds,blocks", [
    (10, 3, [4, 3, 3]), (10, 1, [10]), (9, 3, [3, 3, 3]), (4, 3, [2, 2]), (3, 3, [3]),
    (7, 2, [4, 3])])
def test_rounds_split_into_blocks_of_two_rounds_or_more(rounds: int, builds: int,
                                                         blocks: list[int]) -> None:
    assert block_rounds(rounds, builds) == blocks
    assert sum(block_rounds(rounds, builds)) == rounds


def test_arms_are_rebuilt_only_while_their_builds_are_cheap_against_a_block() -> None:
    assert rebuild_pays(2.0, 6.0)  # a CNN's three arms against 4 rounds of 0.5 s
    assert not rebuild_pays(30.0, 6.0)  # ResNet50's builds
    assert rebuild_pays(30.0, 6.0, share=10.0) and not rebuild_pays(0.1, 6.0, share=0.0)


def test_a_session_plans_as_many_builds_as_its_smallest_block_pays_for() -> None:
    # An MLP's four arms: 1.2 s to build, 2 s a round: five blocks of 2 rounds.
    assert planned_builds(1.2, 2.0, 10, 5, share=1.0) == 5
    # Never more than asked, nor blocks of a single round.
    assert planned_builds(1.2, 2.0, 10, 3, share=1.0) == 3
    assert planned_builds(0.1, 2.0, 5, 5, share=1.0) == 2
    # A CNN at batch 256: 3.5 s against 1.5 s a round. Three blocks ([4, 3, 3]) measure
    # 4.5 s at the least, four ([3, 3, 2, 2]) 3 s: three builds.
    assert planned_builds(3.5, 1.5, 10, 5, share=1.0) == 3
    # At half the share only two blocks of 5 rounds pay (half of 7.5 s covers 3.5 s),
    # and nothing pays for 4 s.
    assert planned_builds(3.5, 1.5, 10, 5, share=0.5) == 2
    assert planned_builds(4.0, 1.5, 10, 5, share=0.5) == 1
    # ResNet50: 27 s of builds against 1.2 s a round: one build.
    assert planned_builds(27.0, 1.2, 10, 5, share=1.0) == 1
    assert planned_builds(1.0, 2.0, 10, 1, share=1.0) == 1


def test_only_short_calls_get_a_re_warm_call_before_their_windows() -> None:
    window = 0.5
    assert rewarms(0.004, window, 1) == 1  # an MLP step: the caches matter
    assert rewarms(0.0, window, 2) == 2  # not timed yet: the first window re-warms
    assert rewarms(0.17, window, 1) == 0  # a CNN at batch 256: a third of its window
    assert rewarms(REWARM_SHARE * window, window, 1) == 0


def test_each_block_of_rounds_runs_on_arms_built_afresh(
        rebuilt: tuple[Path, list[RunResult]], kept: tuple[Path, list[RunResult]]) -> None:
    """Rebuilding forced (any cost pays), then refused (none does): the windows say
    which build they measured, and the session how many builds it made."""
    for (tmp_path, results), builds in ((rebuilt, [0, 0, 1, 1, 2, 2]), (kept, [0] * 6)):
        assert all(r.status == "ok" for r in results), [r.reason for r in results]
        for r in results:
            assert r.figures is not None and r.interleaved is not None
            assert [w.build for w in r.figures.windows] == builds
            assert [w.index for w in r.figures.windows] == list(range(6))
            assert r.interleaved.builds == max(builds) + 1
            assert r.figures.learned is not None
        log = (tmp_path / "arms.log").read_text(encoding="utf-8")
        assert log.count("arm 0 built and warm") == max(builds) + 1


def test_mirrored_arms_on_different_device_counts_share_a_process(
        rebuilt: tuple[Path, list[RunResult]]) -> None:
    """Mirrored arms on 4 and 2 devices both run in one process."""
    # Each MirroredStrategy's collective group keys started at 1: the second one built,
    # on another device count, failed at its first all-reduce (bench.child.backends.tf.build).
    _, results = rebuilt
    mirrored = [r for r in results if r.spec.strategy == "mirrored"]
    assert sorted(r.spec.devices for r in mirrored) == [2, 4]
    assert [r.status for r in mirrored] == ["ok", "ok"], [r.reason for r in mirrored]
    assert len({r.launcher["tasks"][0]["pid"] for r in results}) == 1
