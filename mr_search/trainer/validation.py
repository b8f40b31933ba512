"""How fast a validation pass went (``val-speed/*``), logged by the MR-Search trainer and read by ``run_summary``.

Free of torch and verl, so that the end-of-run summary does not import them.
"""

from __future__ import annotations

VALIDATION_SPEED = "val-speed"


def validation_speed(meta_episodes: int, seconds: float) -> dict[str, float]:
    """How fast a validation pass went: its meta-episodes (questions x val n), wall seconds, meta-episodes/s."""
    if meta_episodes < 0 or seconds <= 0:
        raise ValueError(f"a validation pass of {meta_episodes} meta-episodes in {seconds} s is not a measurement")
    return {
        f"{VALIDATION_SPEED}/meta_episodes": float(meta_episodes),
        f"{VALIDATION_SPEED}/seconds": seconds,
        f"{VALIDATION_SPEED}/meta_episodes_per_s": meta_episodes / seconds,
    }
