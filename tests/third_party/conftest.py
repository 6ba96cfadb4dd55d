"""The vendored suites run through the fwbridge subclasses in tests/, not on their own."""

collect_ignore_glob = ["python_can/*.py"]
