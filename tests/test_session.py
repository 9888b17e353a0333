"""An arms session with a multi-process member taking turns (bench.launch.session)."""

from __future__ import annotations

import dataclasses
import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from bench.hardware import detect
from bench.launch import session as session_mod
from bench.launch.session import Copy, SessionError, members_of, run_session, run_sessions
from bench.results.pairs import session_log_ratios
from bench.spec import RunSpec
from bench.tasks import Task

TINY = {"size": "tiny", "max_seconds": 0.2, "min_steps": 3, "max_steps": 10,
        "warmup_steps": 1}
ONE = RunSpec(workload="mlp", strategy="default", devices=1, batch=16, **TINY)
TWO = ONE.replace(strategy="mirrored", devices=2)
MWM = ONE.replace(strategy="multi_worker_mirrored", devices=2)


def test_which_configurations_join_a_session_and_which_cannot() -> None:
    assert members_of([ONE, TWO, MWM]) == [2]
    with pytest.raises(SessionError, match="parameter_server.*cannot join an arms session"):
        members_of([ONE, ONE.replace(strategy="parameter_server", devices=2)])
    with pytest.raises(SessionError, match="needs an in-process configuration"):
        run_session([MWM], Path("/nonexistent/x.log"), rounds=2)


def test_a_multi_worker_member_takes_turns_with_the_arms_window_by_window(
        tmp_path: Path) -> None:
    # The arms are built afresh for their second block (rebuilding forced), inside
    # their own turn; the member's workers build once. An arm is profiled after the
    # rounds, while the member's workers wait for their own last turn.
    results = run_session([ONE, MWM, TWO], tmp_path / "s.log", rounds=4, seed=2, builds=2,
                          rebuild_share=1e9, profile_dirs=[tmp_path / "prof", None, None],
                          profile_steps=2)
    assert [r.status for r in results] == ["ok"] * 3, [r.reason for r in results]
    one, mwm, _ = results
    assert {r.interleaved.session for r in results if r.interleaved} == {
        one.interleaved.session if one.interleaved else None}
    assert [r.interleaved.processes for r in results if r.interleaved] == [3, 3, 3]
    # Arms first, then members, in the labels the session records.
    assert mwm.interleaved is not None and mwm.interleaved.arm == 2
    assert mwm.interleaved.arms == [ONE.label(), TWO.label(), MWM.label()]
    windows = {r.spec.strategy: r.figures.windows for r in results if r.figures}
    assert [len(w) for w in windows.values()] == [4, 4, 4]
    assert [w.build for w in windows["default"]] == [0, 0, 1, 1]
    assert [w.build for w in windows["multi_worker_mirrored"]] == [0, 0, 0, 0]
    # No two windows of the session overlap: one party measures at a time.
    spans = sorted((w.start_ts, w.end_ts) for ws in windows.values() for w in ws)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))
    # Round r of every configuration ends before round r + 1 of any starts.
    for r in range(3):
        assert max(w[r].end_ts for w in windows.values()) <= \
            min(w[r + 1].start_ts for w in windows.values())
    # The member's figures are the chief's, with each worker's own beside them.
    assert mwm.figures is not None and mwm.replicas == 2
    assert mwm.figures.tasks is not None
    assert [t.task for t in mwm.figures.tasks] == ["worker0", "worker1"]
    assert one.figures is not None and one.figures.breakdown is not None
    assert one.figures.breakdown.profiled_steps == 2
    assert len({t["pid"] for t in mwm.launcher["tasks"]}) == 3
    assert (tmp_path / "s.m0.worker1.log").exists()
    # To the reports the member is an arm of the session: one pair a session.
    assert len(session_log_ratios([one], [mwm])) == 1


def test_a_member_that_dies_is_recorded_and_the_arms_go_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRATBENCH_FAULT", "worker1:kill_after_warmup")
    one, mwm = run_session([ONE, MWM], tmp_path / "s.log", rounds=3, seed=1)
    assert one.status == "ok", one.reason
    assert one.figures is not None and len(one.figures.windows) == 3
    assert mwm.status == "failed" and mwm.figures is None
    assert "multi_worker_mirrored" in (mwm.reason or "") and "worker" in (mwm.reason or "")


def test_a_members_workers_get_their_share_one_build_and_a_profile_each(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # What each worker process is told, without starting any: its local spec, one
    # build and no re-warm calls (nothing decided on one worker's clock), and its own
    # profile directory under the run's (as a run of its own profiles them).
    started: list[tuple[str, dict[str, Any], dict[str, Any] | None]] = []

    def fake(task: Task, arms: Path, run_dir: Path, log: Path, hw: Any, *,
             tf_config: dict[str, Any] | None = None, **_: Any) -> Any:
        started.append((task.name, json.loads(arms.read_text()), tf_config))
        raise RuntimeError("not started")

    monkeypatch.setattr(session_mod, "start_paced", fake)
    party = session_mod._Party("m", [1], 1, 0.2)
    with pytest.raises(RuntimeError, match="not started"):
        session_mod._start_member(party, MWM.replace(repeats=5), tmp_path / "m0",
                                  tmp_path / "s.m0", rounds=5, seed=4, rewarm_calls=1,
                                  profile_dir=tmp_path / "prof", profile_steps=3, hw=detect())
    name, doc, tf_config = started[0]
    assert name == "worker0" and tf_config is not None
    assert tf_config["task"] == {"type": "worker", "index": 0}
    assert len(tf_config["cluster"]["worker"]) == 2
    assert (doc["rounds"], doc["builds"], doc["rewarm_calls"], doc["seed"]) == (5, 1, 0, 4)
    assert [RunSpec.from_dict(d).strategy for d in doc["specs"]] == ["multi_worker_mirrored"]
    assert doc["profile"] == {"dirs": [str((tmp_path / "prof" / "worker0").resolve())],
                              "steps": 3}
    # A member of one process (the JAX lane's) re-warms before its windows as an arm does.
    jax = MWM.replace(strategy="data_parallel", backend="jax", repeats=5)
    with pytest.raises(RuntimeError, match="not started"):
        session_mod._start_member(party, jax, tmp_path / "m1", tmp_path / "s.m1", rounds=5,
                                  seed=4, rewarm_calls=1, profile_dir=None, profile_steps=0,
                                  hw=detect())
    name, doc, tf_config = started[-1]
    assert doc["rewarm_calls"] == 1 and doc["specs"][0]["backend"] == "jax"


def test_sessions_measured_together_keep_their_own_sessions_and_take_turns(
        tmp_path: Path) -> None:
    # Two sessions of one answer at once: each its own arms' process and member, its
    # own session id (its own pair), and no window of one overlaps any of the other's.
    copies = [Copy([ONE, MWM, TWO], tmp_path / "s1.log", 1),
              Copy([ONE, MWM, TWO], tmp_path / "s2.log", 2)]
    first, second = run_sessions(copies, rounds=3)
    every = [*first, *second]
    assert [r.status for r in every] == ["ok"] * 6, [r.reason for r in every]
    ids = [{r.interleaved.session for r in s if r.interleaved} for s in (first, second)]
    assert all(len(i) == 1 for i in ids) and ids[0] != ids[1]
    assert {(r.interleaved.together, r.interleaved.processes) for r in every
            if r.interleaved} == {(2, 3)}
    assert [r.interleaved.seed for r in (first[0], second[0]) if r.interleaved] == [1, 2]
    assert len({t["pid"] for r in every for t in r.launcher["tasks"]}) == 6
    spans = sorted((w.start_ts, w.end_ts) for r in every if r.figures
                   for w in r.figures.windows)
    assert len(spans) == 18 and all(a[1] <= b[0] for a, b in itertools.pairwise(spans))
    assert (tmp_path / "s1.m0.worker1.log").exists() and (tmp_path / "s2.log").exists()
    # A session's pair is its own: two sessions, two pairs.
    assert len(session_log_ratios([first[0], second[0]], [first[1], second[1]])) == 2
    # What another session of it would cost: the group's wall time shared out.
    assert first[0].session_wall_s == pytest.approx(first[0].wall_s / 2)
    # On CPUs every process, members' included, was forked from the pre-imported
    # starter (bench.launch.prestart): its start-up says so, and what it was spared.
    forked = {r.figures.startup.preimported_s is not None for r in every if r.figures}
    assert forked == {not detect().gpus}


def test_a_session_whose_arms_fail_ends_alone_and_the_others_go_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The second session's arms' process is killed once warm; its member is then
    # killed with it, and the first session measures every round.
    real = session_mod.start_paced
    arms_started: list[Path] = []

    def faulty(task: Task, arms: Path, run_dir: Path, log: Path, hw: Any,
               **kw: Any) -> Any:
        if task.role == "single":
            arms_started.append(log)
            if len(arms_started) == 2:
                kw["env"] = {"STRATBENCH_FAULT": f"{task.name}:kill_after_warmup"}
        return real(task, arms, run_dir, log, hw, **kw)

    monkeypatch.setattr(session_mod, "start_paced", faulty)
    first, second = run_sessions([Copy([ONE, MWM], tmp_path / "a.log", 1),
                                  Copy([ONE, MWM], tmp_path / "b.log", 2)], rounds=3)
    assert [r.status for r in first] == ["ok", "ok"], [r.reason for r in first]
    assert first[0].figures is not None and len(first[0].figures.windows) == 3
    assert [r.status for r in second] == ["failed", "failed"]
    assert "its session's arms' process" in (second[1].reason or "")
    assert all(t["returncode"] is not None for r in second for t in r.launcher["tasks"])


def test_sessions_measured_together_need_copies_and_no_gpus(
        monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SessionError, match="no session to measure"):
        run_sessions([], rounds=2)
    gpus = dataclasses.replace(detect(), gpus=(object(),))
    monkeypatch.setattr(session_mod, "detect", lambda: gpus)
    with pytest.raises(SessionError, match="2 sessions measured together"):
        run_sessions([Copy([ONE, TWO], Path("a.log")), Copy([ONE], Path("b.log"))], rounds=2)


@pytest.mark.parametrize("until, rounds", [(None, 10), (20.0, 3), (-1.0, 2)])
def test_rounds_stop_before_one_would_end_after_the_time_given(
        monkeypatch: pytest.MonkeyPatch, until: float | None, rounds: int) -> None:
    """Rounds of two windows of 3 s each: with 20 s given, the third round ends at 18 s
    and a fourth would end at 24 s; with a time already past, two rounds still run
    (their builds were paid for, and two give the rounds' variance); with none, all."""
    clock = [0.0]
    turns: list[str] = []

    def window(party: Any, deadline: float) -> None:
        turns.append(party.label)
        clock[0] += 3.0

    monkeypatch.setattr(session_mod, "_window", window)
    arms = session_mod._Party("arms", [0], 1, 0.5, is_arms=True)
    member = session_mod._Party("member", [1], 1, 0.5, arms_party=arms)
    done = session_mod._conduct([arms, member], 10, 0, 1e9, until, clock=lambda: clock[0])
    assert done == rounds
    assert sorted(turns) == ["arms"] * rounds + ["member"] * rounds  # whole rounds only


def test_a_session_given_a_time_that_has_passed_measures_two_rounds(tmp_path: Path) -> None:
    """The launcher ends the rounds early (its processes see the end of their turns, as
    after the last round): every party, the member's workers too, measures the same
    two windows, and the result says how many rounds ran."""
    import time

    (one, mwm), = run_sessions([Copy([ONE, MWM], tmp_path / "s.log", 1)], rounds=6,
                               windows_until=time.monotonic())
    assert [one.status, mwm.status] == ["ok", "ok"], [one.reason, mwm.reason]
    assert one.figures is not None and mwm.figures is not None
    assert len(one.figures.windows) == len(mwm.figures.windows) == 2
    assert one.interleaved is not None and one.interleaved.rounds == 2
