"""`make compare`: MR-Search against K = 1 (and two more arms) on the embedded world, the test written before the run.

examples/embedded_world/scripts/compare.sh trains and evaluates; this package writes the plan, matches the arms'
model-written tokens, and turns the run folders into the report (the final-answer test on the test split with its
paired bootstrap, aggregation over seeds, plots, report.md, a JSON with everything and the history of results).
"""
