"""Evaluation: meta-episodes with K_eval attempts, EM/F1 per data source per attempt, reports and dumps."""
