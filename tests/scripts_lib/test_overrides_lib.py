"""scripts/lib/overrides.sh: the value a Hydra override on a launcher's command line gives a key."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LIB = REPO / "scripts" / "lib" / "overrides.sh"
KEY = "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"


def _value(key: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", f'set -euo pipefail; source "{LIB}"; override_value "$@"', "bash", key, *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


@pytest.mark.parametrize(
    "args, want",
    [
        ([f"{KEY}=1"], "1"),
        ([f"+{KEY}=2"], "2"),
        ([f"++{KEY}=3"], "3"),
        ([f"{KEY}=4", "trainer.total_training_steps=9", f"++{KEY}=5"], "5"),  # the last one wins, as in Hydra
        ([f"{KEY}='6'"], "6"),
        ([f"{KEY}=4", f"~{KEY}"], None),  # deleted after it was set
        ([f"{KEY}_other=7", f"x.{KEY}=8", "trainer.n_gpus_per_node=2"], None),  # other keys, a longer key
        ([], None),
    ],
)
def test_the_last_override_of_the_key_gives_its_value(args: list[str], want: str | None) -> None:
    done = _value(KEY, *args)
    if want is None:
        assert done.returncode == 1 and done.stdout == "", done
    else:
        assert done.returncode == 0 and done.stdout == f"{want}\n", done


def test_a_value_with_an_equals_sign_is_kept_whole() -> None:
    done = _value("data.train_files", "data.train_files=/d/a=b.parquet")
    assert done.stdout == "/d/a=b.parquet\n"
