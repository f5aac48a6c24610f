from spark_support import standalone_master  # noqa: F401 (a fixture)
