"""The reference metrics service: event data, the metrics over it, building its aggregates, serving them, HTTP."""
