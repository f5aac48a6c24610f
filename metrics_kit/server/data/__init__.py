"""Event data: the table schema, finding and validating the files, the synthetic demo data set."""
