"""scripts/lib/pool.sh: training runs side by side, a failed one started again, the others kept going."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable

    Sourced = Callable[[str, str], subprocess.CompletedProcess[str]]  # the `sourced` fixture (conftest.py)


def test_at_most_size_jobs_run_at_once_and_all_finish(tmp_path: Path, sourced: Sourced) -> None:
    log = tmp_path / "log"
    result = sourced(
        "pool.sh",
        f'job() {{ echo "start $1" >> "{log}"; sleep 0.4; echo "end $1" >> "{log}"; }}\n'
        "pool_init 2 0 0\n"
        "for name in a b c d; do pool_add $name job $name; done\n"
        'pool_wait && echo "all done: ${#POOL_FAILED[@]} failed"',
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "all done: 0 failed"
    running, most = 0, 0
    for line in log.read_text().splitlines():
        running += 1 if line.startswith("start") else -1
        most = max(most, running)
    assert most == 2, log.read_text()
    assert sorted(log.read_text().splitlines()) == sorted(f"{w} {n}" for w in ("start", "end") for n in "abcd")


def test_a_failed_job_runs_again_and_sees_its_launch(tmp_path: Path, sourced: Sourced) -> None:
    tries = tmp_path / "tries"
    result = sourced(
        "pool.sh",
        # fails on its first launch (a port raced), passes on the second
        f'flaky() {{ echo "$POOL_TRY" >> "{tries}"; ((POOL_TRY > 0)); }}\n'
        "pool_init 2 2 0\n"
        "pool_add flaky flaky\n"
        "pool_wait && echo passed",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "passed"
    assert tries.read_text().split() == ["0", "1"], "launched twice, told which launch"
    assert "pool: 'flaky' failed (exit 1); launch 2 of 3 in 0 s" in result.stderr


def test_a_job_failed_for_good_stops_new_ones_and_lets_those_in_flight_finish(tmp_path: Path, sourced: Sourced) -> None:
    done, late = tmp_path / "long-done", tmp_path / "late-started"
    result = sourced(
        "pool.sh",
        "broken() { return 4; }\n"
        f'long() {{ sleep 1; touch "{done}"; }}\n'
        "pool_init 2 1 0\n"
        "pool_add long long\n"
        "pool_add broken broken\n"
        f'pool_add late touch "{late}" || echo "not started"\n'  # waits for a slot; the failure comes first
        'pool_wait || echo "failed: ${POOL_FAILED[*]}"',
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["not started", "failed: broken"]
    assert done.exists(), "the run beside the failed one trained on to its end"
    assert not late.exists(), "nothing new starts once a run has failed for good"
    assert result.stderr.count("pool: 'broken' failed (exit 4)") == 1, "one retry, then failed for good"


def test_running_names_a_job_in_flight_and_stop_ends_it_and_its_program(tmp_path: Path, sourced: Sourced) -> None:
    pid_file = tmp_path / "pid"
    result = sourced(
        "pool.sh",
        f'job() {{ sleep 600 & echo $! > "{pid_file}"; wait; }}\n'
        "pool_init 2 3 0\n"
        "pool_add sleeper job\n"
        f'for _ in $(seq 300); do [[ -s "{pid_file}" ]] && break; sleep 0.1; done\n'
        'pool_running sleeper && echo "running"\n'
        'pool_running other || echo "no other"\n'
        "pool_stop\n"
        # gone within 30 s (a busy machine reaps the orphan late); left alone the sleeper would live 10 minutes
        f'for _ in $(seq 300); do kill -0 "$(cat "{pid_file}")" 2>/dev/null || break; sleep 0.1; done\n'
        f'kill -0 "$(cat "{pid_file}")" 2>/dev/null && echo "still there" || echo "ended"',
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["running", "no", "other", "ended"]


def test_jobs_that_ended_before_the_wait_keep_their_status(sourced: Sourced) -> None:
    # `wait -n PID...` skips jobs that ended before it is called (bash: "no such job"): a run that failed while the
    # harness slept between launches was lost, and the wait then hung on the others or failed for the wrong one.
    result = sourced(
        "pool.sh",
        "pool_init 3 0 0\n"
        "pool_add quick-fail false\n"
        "pool_add quick-pass true\n"
        "sleep 1\n"
        'pool_wait || echo "failed: ${POOL_FAILED[*]}"',
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "failed: quick-fail"
    assert "no such job" not in result.stderr
