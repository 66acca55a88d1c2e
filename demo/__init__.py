"""The demo: a short tour of Accurate on an in-memory cluster, run with ``./scripts/demo``."""
