"""Reading and drawing namespace trees: ``list`` itself, and the views the other reading commands
share, which click's command tree (``kubectl_accurate.main``) calls and the entry point also runs
without click.

``list`` with at most a ROOT and no flag is the command most often typed, and on a small
cluster most of its time was start-up, of which importing click and building the command tree
was more than a quarter (issue 29, bench/RESULTS.md): nothing on such a command line needs
them, since every flag is left at its default. So the entry point runs it here straight
(``run_straight``), and nothing on this path imports click: a failure alone does, to be
reported exactly as the command tree reports it (``kubectl_accurate.main.report``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from kubectl_accurate import preconnect
from kubectl_accurate.output import CliError, Printer

if TYPE_CHECKING:
    from kubectl_accurate.markers import Marking
    from kubectl_accurate.namespaces import Namespaces
    from kubectl_accurate.reads import Below
    from kubectl_accurate.subnamespace_api import SubNamespaceApi


def run_straight() -> None:
    """The command line's ``list [ROOT]`` (or ``ls``), which has no flag, as the command tree
    would run it with every flag at its default."""
    from kubectl_accurate.subnamespace_api import SubNamespaceApi
    from libaccurate.network.kube import ConnectionOptions

    top = sys.argv[2] if len(sys.argv) > 2 else None
    try:
        api = SubNamespaceApi(preconnect.connect(ConnectionOptions()), None)
        list_trees(api, top, None, None)
    except (Exception, KeyboardInterrupt) as error:
        from kubectl_accurate.main import report

        report(error)


def list_trees(
    api: SubNamespaceApi, top: str | None, output: str | None, markers: bool | None
) -> None:
    """The trees under ``top`` (every root without it), drawn or as ``output``; marked as
    ``markers`` says, by default when drawn (kubectl_accurate.main, ``list``, says how)."""
    from kubectl_accurate.reads import TREE_NOTE

    marking: Marking | None = None
    # Without ROOT the trees are drawn from the top of the current namespace's chain, so a
    # partial view reads down from every namespace on the way up: one grafted without a
    # SubNamespace is then in its tree when the view starts at it (kubectl_accurate.reads).
    below: Below = "named" if top else "chain"
    # Drawn trees are marked unless --no-markers; data (-o) only when --markers asks.
    marked = output is None if markers is None else markers
    if marked:
        from kubectl_accurate.markers import Marking, read_with_origins

        namespaces, origins = read_with_origins(api, lambda: view(api, [top], below, TREE_NOTE))
        marking = Marking(namespaces.forest, origins)
    else:
        namespaces = view(api, [top], below, TREE_NOTE)
    tops = shown_tops(namespaces.forest.roots(), top, namespaces, "roots")
    show_trees(tops, namespaces.forest.children, "children", output, marking)


def view(
    api: SubNamespaceApi, names: list[str | None], below: Below = "nothing", note: str = ""
) -> Namespaces:
    """The namespaces a reading command shows; a partial view says so on stderr, with
    ``note`` when the command has one of its own."""
    from kubectl_accurate.reads import LIMITED_NOTE, read_namespaces

    namespaces = read_namespaces(api.kube, api, names, below)
    if not namespaces.complete:
        sys.stderr.write(f"{note or LIMITED_NOTE}\n")  # as click.echo writes a plain line
        sys.stderr.flush()
    return namespaces


def shown_tops(
    default: tuple[str, ...], top: str | None, namespaces: Namespaces, what: str
) -> tuple[str, ...]:
    """The namespaces whose trees are shown: ``top``, else ``default`` (the roots, the
    templates), refused when ``top`` is not there or a partial view found none of ``what``."""
    if top is not None:
        if top not in namespaces.forest:
            raise CliError(namespaces.missing(top))
        return (top,)
    if default or namespaces.complete:
        return default
    raise CliError(
        f"you may not list namespaces, and there are no {what} among those you may read from "
        "the current namespace; name one, or pick a current namespace with -n"
    )


def show_trees(
    tops: tuple[str, ...],
    step: Callable[[str], tuple[str, ...]],
    key: str,
    output: str | None,
    marking: Marking | None = None,
) -> None:
    from kubectl_accurate import trees

    grown = [trees.grow(top, step, marking.mark if marking else None) for top in tops]
    printer = Printer()
    if output:
        printer.data([trees.to_data(tree, key) for tree in grown], output)
    else:
        trees.draw(printer, grown, marking.legend() if marking else "")
