"""UIDs for objects and reviews: random version 4 UUIDs, as kube-apiserver makes them.

They are drawn from a generator of the module's own, seeded from the system once (and again in
a forked child), rather than from the system's random source on each call (``uuid.uuid4``): a
read of that source lets the interpreter switch threads, and a write, which wakes the server's
watches and controllers, then waited for them in the middle of its pipeline (a counted write
makes three UIDs). Its own generator, so that code seeding the ``random`` module (property
tests do) cannot make two objects share a UID. Nothing here needs them unguessable.
"""

from __future__ import annotations

import os
import random
import uuid

_GENERATOR = random.Random()
os.register_at_fork(after_in_child=_GENERATOR.seed)


def new_uid() -> str:
    """A fresh UID in the usual text form."""
    return str(uuid.UUID(int=_GENERATOR.getrandbits(128), version=4))
