"""Benchmarks of Accurate for Python (DESIGN.md section 9, issue 8): ``python -m bench``."""
