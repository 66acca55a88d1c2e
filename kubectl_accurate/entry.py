"""Where ``kubectl-accurate`` starts, in both forms it is installed (the console script and the
release binary's launcher): the command lines that only print a text are answered at once,
and every other runs with the garbage collector set for a process that lives a fraction of a
second (issue 18).

``--version``, the top-level help (``--help``, ``-h``, ``help``) and ``completion SHELL`` print
a text that depends on nothing but the command tree: importing click and the tree to render it
was nine tenths of such a run (``completion bash`` runs in every new shell). They print the
text click rendered ahead, kept in ``kubectl_accurate.rendered`` and held to click's rendering
by a test; the help only on a terminal at least as wide as the one it was rendered for (or a
pipe), since click wraps it to the terminal. Anything else (a flag more, a completion request
in the environment, a narrow terminal) goes to click.

Importing click and the command tree makes tens of thousands of objects, none of them garbage,
and the collector's passes over them, during the imports and again when the interpreter exits,
were 8 % of the instructions of a ``list`` and 13 % of a ``--version`` (bench/RESULTS.md,
"Start-up, third pass"). So the collector is off while the command tree loads; what loaded is
then frozen (``gc.freeze``: kept out of every later pass) and the collector is on again while
the command runs, so a long command (``sudo``) still collects its garbage; what the command
built is frozen as well before the interpreter exits, so that its last passes skip it. Nothing
else changes: exit handlers, flushing and clean-up run as before.

While the command runs, the collector's first pass waits for a million new objects rather than
700 (libaccurate.network.collector, which the controller uses over its caches too). A command
reads the API's answers, trees of dicts and lists without a cycle among them, and the passes that
700 triggers walk those trees again and again as they grow: decoding the namespaces and
SubNamespaces of 10,000 namespaces and building their forest took 544 ms with the default and
219 ms with this threshold, about as with no collector at all (222 ms; issue 29,
bench/RESULTS.md). A command that truly runs long still collects.

Before anything else loads, ``list`` starts connecting (``kubectl_accurate.preconnect``): the
handshakes' round trips pass while the modules load. A ``list`` with no flag, the one that
connects ahead, then runs without click and its command tree (``kubectl_accurate.listing``).
"""

from __future__ import annotations

import gc
import os
import sys


def main() -> None:
    args = sys.argv[1:]
    if _answered(args):
        return
    gc.disable()
    # Imported here: it loads typing, which the texts answered ahead have no use for (it was
    # two fifths of a --version's instructions).
    from kubectl_accurate import preconnect

    if preconnect.start(args):
        from kubectl_accurate.listing import run_straight as run
    else:
        from kubectl_accurate.main import main as run
    from libaccurate.network import collector

    collector.hold()
    gc.enable()
    try:
        run()
    finally:
        gc.freeze()


def _answered(args: list[str]) -> bool:
    """Print the text rendered ahead for this command line, if it has one that this run would
    print too, and say whether it did."""
    from kubectl_accurate import rendered

    key = tuple(args)
    text = rendered.ANSWERS.get(key)
    if text is None or rendered.COMPLETE_VAR in os.environ:
        return False
    if key in rendered.AT_WIDEST and columns() < rendered.WIDEST:
        return False
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        sys.exit(1)  # as click does when the reader has gone: no traceback
    return True


def columns() -> int:
    """The terminal's width as ``shutil.get_terminal_size`` reads it, which click wraps help to
    (``COLUMNS`` first, then the terminal on standard output, else 80), without importing
    shutil, which loads compression modules and ``re``."""
    try:
        width = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        width = 0
    if width > 0:
        return width
    if sys.__stdout__ is None:
        return 80
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns or 80
    except (ValueError, OSError):
        return 80
