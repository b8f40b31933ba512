"""`make compare`: MR-Search (K = 3) against the K = 1 baseline on the embedded world, at equal sampled tokens.

examples/embedded_world/scripts/compare.sh trains and evaluates; this package turns the run folders into the report
(aggregation over seeds, token budgets, plots, report.md, a JSON with everything and the history of results).
"""
