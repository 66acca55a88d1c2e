"""UIDs for objects and reviews: random version 4 UUIDs, as kube-apiserver makes them.

They are drawn from the process's own generator rather than the system's (``uuid.uuid4``): a
read of the system's random source lets the interpreter switch threads, and a write, which
wakes the server's watches and controllers, then waited for them in the middle of its
pipeline (a counted write makes three UIDs). Nothing here needs them unguessable.
"""

from __future__ import annotations

import random
import uuid


def new_uid() -> str:
    """A fresh UID in the usual text form."""
    return str(uuid.UUID(int=random.getrandbits(128), version=4))
