"""Events -> aggregates: the engines (DuckDB, Spark) behind one protocol, the computation of every
metric on them, incremental builds. Nothing here is needed to serve aggregates already built."""
