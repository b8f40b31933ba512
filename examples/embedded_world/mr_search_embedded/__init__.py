"""MR-Search's embedded world: a CPU-sized search task, a tiny policy, its warm start and the comparison harness."""
