"""Run logs: the per-step figures of a training run folder, its summary table and the trajectory viewer."""
