"""Benchmarks read from training runs' logs: the MR-Search step's cost against the K = 1 step's."""
