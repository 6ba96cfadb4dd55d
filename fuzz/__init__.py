"""Coverage-guided fuzz targets (atheris) for everything that parses outside input."""
