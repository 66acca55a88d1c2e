"""The core of Accurate for Python: its wire format and its rules as pure functions.

Every module here except the adapter to the Kubernetes API (``libaccurate.network.kube``, with
``libaccurate.network.kubeconfig`` choosing its endpoint and credentials) is pure:
plain dicts in, data out, no I/O, no clock and no module-level state, so that the CLI, the
controller and the tests all share the same rules.
"""

__version__ = "0.1.0"
