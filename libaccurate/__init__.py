"""The core of Accurate for Python: its wire format and its rules as pure functions.

Every module here except ``libaccurate.kube`` (the one adapter to the Kubernetes API) is pure:
plain dicts in, data out, no I/O, no clock and no module-level state, so that the CLI, the
controller and the tests all share the same rules.
"""

__version__ = "0.1.0"
