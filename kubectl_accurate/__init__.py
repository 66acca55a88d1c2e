"""The `kubectl accurate` plugin: a thin Click shell around libaccurate."""
