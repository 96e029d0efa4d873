"""Records to answers: metrics, frontiers, tables, plots, the report, result files, step log, trace events."""
