"""The thread tuner: keeps the faster thread count as the machine's load changes, and rejects bad settings."""

from __future__ import annotations

import pytest

from mr_search_embedded.warmstart.threads import ThreadTuner, TunerConfig, default_candidates


class FakeMachine:
    """A clock whose step time depends on the thread count set and on whether another process is busy."""

    def __init__(self) -> None:
        self.now = 0.0
        self.threads = 0
        self.busy = False
        self.switches = 0

    def set_threads(self, threads: int) -> None:
        self.threads = threads
        self.switches += 1

    def clock(self) -> float:
        return self.now

    def step_seconds(self) -> float:
        if self.threads == 2:
            return 2.4 if self.busy else 0.19  # two threads: fast on free cores, very slow when one is taken
        return 0.40 if self.busy else 0.37


def _run(tuner: ThreadTuner, machine: FakeMachine, steps: range, work: float = 1000.0) -> list[int]:
    used = []
    for step in steps:
        tuner.start(step)
        machine.now += machine.step_seconds() * work / 1000.0
        tuner.finish(work)
        used.append(machine.threads)
    return used


def test_it_keeps_all_cores_when_free_and_drops_to_one_when_a_core_is_taken():
    machine = FakeMachine()
    tuner = ThreadTuner(TunerConfig(candidates=(2, 1), period=20, trial=3), machine.set_threads, machine.clock)
    free = _run(tuner, machine, range(60))
    assert tuner.current == 2 and free.count(2) >= 50, "two threads are twice as fast on free cores"
    machine.busy = True
    _run(tuner, machine, range(60, 100))
    assert tuner.current == 1, "another process took a core: one thread is 6x faster"
    machine.busy = False
    _run(tuner, machine, range(100, 160))
    assert tuner.current == 2, "the core is free again: back to two threads"


def test_costs_are_per_unit_of_work_so_batch_length_does_not_decide():
    machine = FakeMachine()
    tuner = ThreadTuner(TunerConfig(candidates=(2, 1), period=10, trial=2), machine.set_threads, machine.clock)
    for step in range(40):
        tuner.start(step)
        work = 3000.0 if machine.threads == 2 else 300.0  # two threads get long batches, one thread short ones
        machine.now += machine.step_seconds() * work / 1000.0
        tuner.finish(work)
    assert tuner.current == 2, "two threads are faster per token even though their steps took longer"


def test_finish_before_start_and_bad_settings_are_errors():
    machine = FakeMachine()
    with pytest.raises(RuntimeError, match="start"):
        ThreadTuner(TunerConfig(candidates=(1,)), machine.set_threads, machine.clock).finish(1.0)
    with pytest.raises(ValueError, match="candidates"):
        TunerConfig(candidates=())
    with pytest.raises(ValueError, match="trial"):
        TunerConfig(candidates=(2, 1), trial=1)
    with pytest.raises(ValueError, match="period"):
        TunerConfig(candidates=(2, 1), period=3, trial=3)
    assert tuple(default_candidates(2)) == (2, 1) and tuple(default_candidates(1)) == (1,)


def test_a_busy_machine_from_the_start_is_noticed_within_a_few_steps():
    machine = FakeMachine()
    machine.busy = True
    tuner = ThreadTuner(TunerConfig(candidates=(2, 1), period=100, trial=3), machine.set_threads, machine.clock)
    used = _run(tuner, machine, range(100))
    assert used[:10].count(1) >= 3 and used[10:].count(2) == 0, "one thread from the first trial on"


class StagedMachine(FakeMachine):
    """Free cores; a cheaper kind of batch from the second stage on (e.g. whole transcripts after windows)."""

    cheap = False

    def step_seconds(self) -> float:
        cost = {2: 0.40, 1: 0.60}[self.threads]
        return cost / 4 if self.cheap else cost


@pytest.mark.parametrize("forget", [True, False])
def test_forgetting_at_a_new_kind_of_batch_keeps_the_choice_on_fresh_costs_only(forget):
    machine = StagedMachine()
    tuner = ThreadTuner(TunerConfig(candidates=(2, 1), period=20, trial=3), machine.set_threads, machine.clock)
    _run(tuner, machine, range(43))
    assert tuner.current == 2
    machine.cheap = True  # just before the trial of steps 44-46
    if forget:
        tuner.forget()
    _run(tuner, machine, range(43, 50))
    if forget:
        assert tuner.current == 2, "two threads are still faster once both are measured on the new batches"
    else:
        assert tuner.current == 1, "without forget, one thread's cheap trial beats two threads' stale costs"
