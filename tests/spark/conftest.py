from spark_support import connect, standalone_master  # noqa: F401 (fixtures)
