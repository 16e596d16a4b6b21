"""`consistent demo`: the whole product on an emulated topology, from workload to report."""
