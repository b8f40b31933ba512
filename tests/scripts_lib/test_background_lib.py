"""scripts/lib/background.sh: one job at a time beside the foreground (make compare's evaluation beside the next
seed's training)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable

    Sourced = Callable[[str, str], subprocess.CompletedProcess[str]]  # the `sourced` fixture (conftest.py)


def test_jobs_run_one_at_a_time_beside_the_foreground(tmp_path: Path, sourced: Sourced) -> None:
    log = tmp_path / "order"
    result = sourced(
        "background.sh",
        f'job() {{ sleep 0.3; echo "$1 done" >> "{log}"; }}\n'
        'background_start "first" job first\n'
        f'echo "foreground" >> "{log}"\n'  # runs while the first job sleeps
        'background_start "second" job second\n'  # waits for the first
        f'echo "after second started" >> "{log}"\n'
        "background_finish\n"
        'echo "$BACKGROUND_WHAT"',
    )
    assert result.returncode == 0, result.stderr
    assert log.read_text().splitlines() == ["foreground", "first done", "after second started", "second done"]
    assert result.stdout.strip() == "second"
    assert sourced("background.sh", "background_finish && echo none-in-flight").stdout.strip() == "none-in-flight"


def test_a_failed_job_is_reported_and_nothing_more_starts(tmp_path: Path, sourced: Sourced) -> None:
    marker = tmp_path / "started"
    result = sourced(
        "background.sh",
        "fails() { return 3; }\n"
        'background_start "the failing one" fails\n'
        f'if background_start "next" touch "{marker}"; then echo started; else echo "$BACKGROUND_WHAT: $?"; fi',
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "the failing one: 3"
    assert not marker.exists()


def test_stop_ends_the_job_and_the_program_it_waits_for(tmp_path: Path, sourced: Sourced) -> None:
    pid_file = tmp_path / "pid"
    result = sourced(
        "background.sh",
        f'job() {{ sleep 600 & echo $! > "{pid_file}"; wait; }}\n'
        'background_start "sleeper" job\n'
        f'for _ in $(seq 300); do [[ -s "{pid_file}" ]] && break; sleep 0.1; done\n'
        "background_stop\n"
        # gone within 30 s (a busy machine reaps the orphan late); left alone the sleeper would live 10 minutes
        f'for _ in $(seq 300); do kill -0 "$(cat "{pid_file}")" 2>/dev/null || break; sleep 0.1; done\n'
        f'if kill -0 "$(cat "{pid_file}")" 2>/dev/null; then echo alive; else echo gone; fi',
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "gone"
