"""Python's garbage collector set for a process that holds the API's answers: the plugin while
a command runs, the controller over its caches.

The API's answers decode into trees of dicts and lists without a cycle among them, freed by
reference counting alone. With the default threshold (a pass of the collector's first
generation every 700 new objects), every pass walks the answers still being built or held,
and the passes of older generations walk them again and again as they grow: decoding the
namespaces and SubNamespaces of 10,000 namespaces and building their forest took 544 ms with
the default and 219 ms with ``THRESHOLD``, about as with no collector at all (222 ms; issue
29, bench/RESULTS.md). ``gc.freeze`` then keeps what a process holds out of every later pass:
the command tree the plugin loaded, the objects the controller's first LIST put in its cache.
A frozen object is still freed when its last reference goes; only one in a cycle would stay.
"""

from __future__ import annotations

import gc

# The first generation's pass waits for a million new objects: a long-running process still
# collects its cycles, well before they weigh.
THRESHOLD = 1_000_000


def hold() -> None:
    """Keep every object the process holds now out of the collector's passes, and let the
    passes wait for ``THRESHOLD`` new objects from now on."""
    gc.freeze()
    gc.set_threshold(THRESHOLD)
