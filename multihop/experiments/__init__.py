"""The experiments layer: runs that combine the registered programs with the evaluation — the comparison of methods
and baselines (its table, charts and report) and the demo. The command line calls it; nothing below imports it."""
