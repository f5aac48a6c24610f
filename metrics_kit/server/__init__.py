"""The reference metrics service: event data, the engine, aggregates, the query layer and HTTP."""
