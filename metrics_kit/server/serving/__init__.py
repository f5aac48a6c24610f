"""Aggregates -> answers: reading aggregates, which periods are complete, the query layer of
/metrics and /explain. Imports nothing of ``building``: serving prebuilt aggregates loads no build code."""
