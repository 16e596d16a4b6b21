"""Shared test configuration: the real-MariaDB fixtures come from the project's own plugin."""

pytest_plugins = ["consistent.testing.pytest_plugin"]
