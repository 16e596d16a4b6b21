"""The standalone MySQL-protocol proxy (``consistent proxy``), built on the ``consistent`` core."""
