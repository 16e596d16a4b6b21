"""Staleness analytics over ``consistent`` traces, on Spark (PySpark)."""
