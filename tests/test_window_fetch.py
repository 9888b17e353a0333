"""The window loop's loss fetches (bench.child.windows.run_window), with a fake loop:
every loss is still fetched and checked, the host runs at most ``fetch_lag`` calls
ahead of them, and the window is synchronised at both ends. No TensorFlow."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pytest

from bench.child.windows import FETCH_LAG, Loop, NoDeviceMemory, Rules, run_window

RULES = Rules(repeats=1, warmup_steps=0, min_steps=1, max_steps=7, max_seconds=60.0)


@dataclass
class FakeLoop:
    """Calls that return their index; the events in the order the window asked."""

    losses: list[float]
    events: list[str] = field(default_factory=list)
    calls: int = 0

    def call(self) -> int:
        self.events.append(f"call{self.calls}")
        self.calls += 1
        return self.calls - 1

    def fetch(self, handle: int) -> float:
        self.events.append(f"fetch{handle}")
        return self.losses[handle]

    def sync(self, handle: int) -> None:
        self.events.append(f"sync{handle}")

    def loop(self) -> Loop:
        return Loop(call=self.call, fetch=self.fetch, sync=self.sync, steps_per_call=1,
                    examples_per_step=8, replicas=1)


def window(fake: FakeLoop, lag: int) -> list[str]:
    run_window(fake.loop(), RULES, 0, -1, memory=NoDeviceMemory("process"),
               host_memory=False, fetch_lag=lag)
    return fake.events


@pytest.mark.parametrize("lag", [0, 1, FETCH_LAG, 100])
def test_every_loss_is_fetched_once_in_order_and_the_window_synced_at_both_ends(
        lag: int) -> None:
    events = window(FakeLoop([1.0 - i / 10 for i in range(7)]), lag)
    assert events[0] == "sync-1"  # opens after the previous call has finished
    assert [e for e in events if e.startswith("fetch")] == [f"fetch{i}" for i in range(7)]
    closing = events.index("sync6")  # closes on the last call
    assert all(e.startswith("fetch") for e in events[closing + 1:])
    assert sum(e.startswith("sync") for e in events) == 2


@pytest.mark.parametrize("lag", [0, 1, FETCH_LAG])
def test_the_host_runs_at_most_lag_calls_ahead_of_the_losses(lag: int) -> None:
    events = window(FakeLoop([0.5] * 7), lag)
    started = fetched = 0
    for e in events:
        started += e.startswith("call")
        fetched += e.startswith("fetch")
        if e.startswith("call"):
            # Before call i starts, the loss of call i - lag - 1 has been fetched.
            assert started - 1 - fetched <= lag, events
    if lag == 0:  # the old protocol: each call's own loss before the next call
        assert events[1:15] == [x for i in range(7) for x in (f"call{i}", f"fetch{i}")]


def test_first_and_last_losses_are_the_windows_first_and_last_calls() -> None:
    fake = FakeLoop([2.0, 1.5, 1.2, 1.1, 1.0, 0.9, 0.8])
    run = run_window(fake.loop(), RULES, 0, -1, memory=NoDeviceMemory("process"),
                     host_memory=False)
    assert (run.window.loss_first, run.window.loss_last) == (2.0, 0.8)
    assert run.window.steps == 7 and len(run.step_times) == 7
    assert run.out == 6  # the next window syncs on the last call


@pytest.mark.parametrize("lag", [0, FETCH_LAG])
@pytest.mark.parametrize("bad_at", [0, 3, 6])
def test_a_nan_or_inf_loss_anywhere_in_the_window_is_caught(lag: int, bad_at: int) -> None:
    losses = [1.0] * 7
    losses[bad_at] = math.nan if bad_at != 3 else math.inf
    with pytest.raises(FloatingPointError, match=f"diverged.*call {bad_at + 1} of 7"):
        window(FakeLoop(losses), lag)


def test_a_negative_lag_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="Received: fetch_lag=-1"):
        window(FakeLoop([1.0] * 7), -1)
