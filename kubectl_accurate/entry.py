"""Where ``kubectl-accurate`` starts, in both forms it is installed (the console script and the
release binary's launcher): the command line, run with the garbage collector set for a
process that lives a fraction of a second (issue 18).

Importing click and the command tree makes tens of thousands of objects, none of them garbage,
and the collector's passes over them, during the imports and again when the interpreter exits,
were 8 % of the instructions of a ``list`` and 13 % of a ``--version`` (bench/RESULTS.md,
"Start-up, third pass"). So the collector is off while the command tree loads; what loaded is
then frozen (``gc.freeze``: kept out of every later pass) and the collector is on again while
the command runs, so a long command (``sudo``) still collects its garbage; what the command
built is frozen as well before the interpreter exits, so that its last passes skip it. Nothing
else changes: exit handlers, flushing and clean-up run as before.
"""

from __future__ import annotations

import gc


def main() -> None:
    gc.disable()
    from kubectl_accurate.main import main as run

    gc.freeze()
    gc.enable()
    try:
        run()
    finally:
        gc.freeze()
