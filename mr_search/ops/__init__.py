"""GPU-run tooling: memory fit, engine warm-up, faults, diagnosis, run checks, shaped models, engine guard, resume."""
