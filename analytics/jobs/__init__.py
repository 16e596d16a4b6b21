"""Runnable entry points: each job reads its inputs, runs pure transforms and writes Parquet.

* :mod:`~analytics.jobs.ingest`: OTLP-JSON traces → ``tables/statements``, ``tables/lag_samples``;
* :mod:`~analytics.jobs.lag`: ``lag_windows``, ``lag_summary``;
* :mod:`~analytics.jobs.reads`: the audit and staleness at read time (``read_audit``,
  ``violations``, ``read_summary``);
* :mod:`~analytics.jobs.cost`: ``cost_by_level``, ``wait_histogram``, ``pinning``, ``sessions``;
* :mod:`~analytics.jobs.report`: ``report.html`` with its PNGs and ``summary.json``;
* :mod:`~analytics.jobs.run`: all of them in order (``consistent analyze``; ``spark-submit
  analytics/jobs/run.py``).
"""
