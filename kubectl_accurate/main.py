"""The ``kubectl accurate`` command tree: the Go plugin's commands, as a thin Click shell.

Each command reads what it needs (one LIST of namespaces, a SubNamespace or two), asks
``changes`` what to write, and hands that to ``writes``; the rules themselves live in
libaccurate. Errors print as ``error: ...`` on stderr with exit code 1; usage errors exit 2.

The modules only some commands need (``describe``, ``preview``, ``watched``, ``writes``) are
imported inside those commands: ``list``, the command people run most, then starts without
loading the planner and the write machinery.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import click
from click.shell_completion import CompletionItem, get_completion_class

from kubectl_accurate import changes, trees
from kubectl_accurate.changes import Change, Refused
from kubectl_accurate.flags import GENERIC_FLAGS_NOTE, connect, generic_flags
from kubectl_accurate.output import OUTPUT_FORMATS, CliError, Printer
from kubectl_accurate.reads import Namespaces, get_subnamespace, list_namespaces
from libaccurate import __version__
from libaccurate.forest import Forest
from libaccurate.kube import Kube, KubeError

F = TypeVar("F", bound=Callable[..., Any])
PROG = "kubectl accurate"
COMPLETE_VAR = "_KUBECTL_ACCURATE_COMPLETE"
SHELLS = ("bash", "zsh", "fish")


class Group(click.Group):
    """A command group that knows kubectl-style aliases (``ns``, ``ls``)."""

    def __init__(self, *args: Any, aliases: Mapping[str, str] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.aliases = dict(aliases or {})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return super().get_command(ctx, self.aliases.get(cmd_name, cmd_name))


class Root(Group):
    """The top group: turns the plugin's own failures into one ``error:`` line and exit 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (Refused, KubeError) as error:
            raise CliError(str(error)) from error


def _complete_namespaces(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """Namespace names for shell completion, using the flags typed so far."""
    try:
        names = list_namespaces(connect(ctx)).by_name
    except KubeError:
        return []
    return [CompletionItem(name) for name in sorted(names) if name.startswith(incomplete)]


def namespace_argument(name: str, metavar: str, required: bool = True) -> Callable[[F], F]:
    return click.argument(
        name, metavar=metavar, required=required, shell_complete=_complete_namespaces
    )


def output_option(function: F) -> F:
    return click.option(
        "-o",
        "--output",
        type=click.Choice(OUTPUT_FORMATS),
        help="Print machine-readable output instead of text.",
    )(function)


def accurate_namespace_option(function: F) -> F:
    return click.option(
        "--accurate-namespace",
        default="accurate",
        show_default=True,
        help="The namespace of accurate-controller, whose config names the watched kinds.",
    )(function)


def write_options(function: F) -> F:
    function = accurate_namespace_option(function)
    return click.option(
        "--dry-run",
        is_flag=True,
        help="Print what would be written, and what the controller would then do; write nothing.",
    )(function)


def epilog(*examples: str, note: str = GENERIC_FLAGS_NOTE) -> str:
    """Examples (each after "kubectl accurate "), kept as typed, then ``note``."""
    lines = "\n".join(f"  kubectl accurate {example}" for example in examples)
    return f"\b\nExamples:\n{lines}\n\n{note}".rstrip()


def command(group: click.Group, name: str, *examples: str) -> Callable[[F], F]:
    """A subcommand with the generic flags, its examples and the note about those flags."""

    def decorate(function: F) -> F:
        wrapped = generic_flags(shown=False)(click.pass_context(function))
        group.command(name, epilog=epilog(*examples))(wrapped)
        return function

    return decorate


@click.group(
    cls=Root,
    aliases={"ls": "list", "ns": "namespace"},
    epilog=epilog(
        "list", "sub create team-a-dev team-a", "ns describe team-a-dev --context prod", note=""
    ),
)
@click.version_option(__version__, prog_name="kubectl-accurate", message="%(prog)s %(version)s")
@generic_flags(shown=True)
def root() -> None:
    """Manage Accurate namespace trees, templates and sub-namespaces.

    Generic kubectl flags below work before or after any subcommand.
    """


@root.group(cls=Group, epilog=epilog("ns describe team-a", "ns set-type team-a root"))
@generic_flags(shown=False)
def namespace() -> None:
    """Describe a namespace or set its type (alias: ns)."""


@root.group(
    cls=Group,
    aliases={"ls": "list"},
    epilog=epilog("template list", "template set team-a base", "template unset team-a"),
)
@generic_flags(shown=False)
def template() -> None:
    """List, set and unset template namespaces."""


@root.group(
    cls=Group,
    aliases={"ls": "list"},
    epilog=epilog("sub create team-a-dev team-a", "sub move team-a-dev team-b", "sub list"),
)
@generic_flags(shown=False)
def sub() -> None:
    """Create, delete, move, graft, cut and list sub-namespaces."""


# Reading commands


@command(root, "list", "list", "list team-a -o yaml")
@namespace_argument("top", "[ROOT]", required=False)
@output_option
def list_trees(ctx: click.Context, top: str | None, output: str | None) -> None:
    """List namespace trees (alias: ls).

    Without ROOT, every root namespace and the sub-namespaces below it; with ROOT, only the
    tree under that namespace. Costs one request, whatever the number of namespaces.
    """
    forest = list_namespaces(connect(ctx)).forest
    _show_trees(_tops(forest.roots(), top, forest), forest.children, "children", output)


sub.add_command(root.commands["list"], "list")


@command(template, "list", "template list", "template ls base")
@namespace_argument("top", "[TEMPLATE]", required=False)
@output_option
def list_templates(ctx: click.Context, top: str | None, output: str | None) -> None:
    """List template namespaces and their instances (alias: ls).

    Without TEMPLATE, every template that is not itself an instance of another template;
    with TEMPLATE, only the tree under it.
    """
    forest = list_namespaces(connect(ctx)).forest
    _show_trees(_tops(forest.templates(), top, forest), forest.instances, "instances", output)


def _tops(default: tuple[str, ...], top: str | None, forest: Forest) -> tuple[str, ...]:
    if top is None:
        return default
    if top not in forest:
        raise CliError(f"namespace {top} not found")
    return (top,)


def _show_trees(
    tops: tuple[str, ...], step: Callable[[str], tuple[str, ...]], key: str, output: str | None
) -> None:
    grown = [trees.grow(top, step) for top in tops]
    printer = Printer()
    if output:
        printer.data([trees.to_data(tree, key) for tree in grown], output)
    else:
        trees.draw(printer, grown)


@command(namespace, "describe", "ns describe team-a-dev")
@namespace_argument("name", "NS")
@output_option
@accurate_namespace_option
def describe_namespace(
    ctx: click.Context, name: str, output: str | None, accurate_namespace: str
) -> None:
    """Show a namespace's type, parent, template, children or instances, and the objects
    propagated into it or from it.

    The propagated kinds come from the controller's config when you may read it, else from
    the kinds Accurate usually propagates; the output says which.
    """
    from kubectl_accurate import describe
    from kubectl_accurate.watched import find_watched

    kube = connect(ctx)
    namespaces = list_namespaces(kube)
    if namespaces.get(name) is None:
        raise CliError(f"namespace {name} not found")
    found = describe.describe(kube, namespaces, name, find_watched(kube, accurate_namespace))
    printer = Printer()
    if output:
        printer.data(found.to_data(), output)
    else:
        describe.show(printer, found)


# Writing commands


def _run(
    ctx: click.Context,
    build: Callable[[Kube, Namespaces], Change],
    dry_run: bool,
    accurate_namespace: str,
) -> None:
    """Read the namespaces, work out the change, then carry it out (or preview it)."""
    from kubectl_accurate import preview
    from kubectl_accurate.watched import find_watched
    from kubectl_accurate.writes import carry_out

    kube = connect(ctx)
    namespaces = list_namespaces(kube)
    change = build(kube, namespaces)
    printer = Printer()

    def show_preview() -> None:
        watched = find_watched(kube, accurate_namespace)
        preview.show(printer, preview.consequences(kube, change, namespaces, watched), watched)

    carry_out(kube, change, namespaces.forest, printer, dry_run, show_preview)


@command(namespace, "set-type", "ns set-type team-a root")
@namespace_argument("name", "NS")
@click.argument("kind", metavar="root|template|none", type=click.Choice(changes.TYPES))
@write_options
def set_type(
    ctx: click.Context, name: str, kind: str, dry_run: bool, accurate_namespace: str
) -> None:
    """Make NS a root or a template namespace, or remove its type with "none"."""
    _run(ctx, lambda _, ns: changes.set_type(ns, name, kind), dry_run, accurate_namespace)


@command(template, "set", "template set team-a base")
@namespace_argument("name", "NS")
@namespace_argument("template_name", "TEMPLATE")
@write_options
def set_template(
    ctx: click.Context, name: str, template_name: str, dry_run: bool, accurate_namespace: str
) -> None:
    """Make NS an instance of the template namespace TEMPLATE.

    NS must be a root or an independent namespace; the controller then copies TEMPLATE's
    inherited labels, annotations and propagated objects into it.
    """
    _run(
        ctx,
        lambda _, ns: changes.set_template(ns, name, template_name),
        dry_run,
        accurate_namespace,
    )


@command(template, "unset", "template unset team-a")
@namespace_argument("name", "NS")
@write_options
def unset_template(ctx: click.Context, name: str, dry_run: bool, accurate_namespace: str) -> None:
    """Stop NS from using its template; copies in update mode will be deleted."""
    _run(ctx, lambda _, ns: changes.unset_template(ns, name), dry_run, accurate_namespace)


def _pairs(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, str]:
    """``k=v,k2=v2`` (repeatable), read like the Go plugin's string-to-string flags."""
    result = {}
    for value in values:
        for item in next(csv.reader([value])) if value else ():
            key, separator, text = item.partition("=")
            if not separator:
                raise click.BadParameter(f"{item!r} must be formatted as key=value")
            result[key.strip()] = text
    return result


@command(
    sub,
    "create",
    "sub create team-a-dev team-a --labels env=dev --annotations owner=alice",
)
@click.argument("name", metavar="NAME")
@namespace_argument("parent", "PARENT")
@click.option(
    "--labels",
    multiple=True,
    callback=_pairs,
    metavar="K=V,...",
    help="Labels for the new namespace (SubNamespace spec.labels).",
)
@click.option(
    "--annotations",
    multiple=True,
    callback=_pairs,
    metavar="K=V,...",
    help="Annotations for the new namespace (SubNamespace spec.annotations).",
)
@write_options
def create_sub(
    ctx: click.Context,
    name: str,
    parent: str,
    labels: dict[str, str],
    annotations: dict[str, str],
    dry_run: bool,
    accurate_namespace: str,
) -> None:
    """Create SubNamespace NAME in PARENT; the controller then creates namespace NAME under it.

    PARENT must be a root or a sub-namespace, and no namespace NAME may exist yet.
    """

    def build(_: Kube, namespaces: Namespaces) -> Change:
        return changes.create_sub(namespaces, name, parent, labels, annotations)

    _run(ctx, build, dry_run, accurate_namespace)


@command(sub, "delete", "sub delete team-a-dev")
@namespace_argument("name", "NAME")
@write_options
def delete_sub(ctx: click.Context, name: str, dry_run: bool, accurate_namespace: str) -> None:
    """Delete the SubNamespace of sub-namespace NAME; the controller then deletes namespace NAME."""

    def build(kube: Kube, namespaces: Namespaces) -> Change:
        found = namespaces.get(name)
        parent = changes.parent_label(found) if found else None
        subnamespace = get_subnamespace(kube, parent, name) if parent else None
        return changes.delete_sub(namespaces, name, subnamespace)

    _run(ctx, build, dry_run, accurate_namespace)


@command(
    sub,
    "move",
    "sub move team-a-dev team-b",
    "sub move team-a-dev team-b --leave-original",
)
@namespace_argument("name", "NS")
@namespace_argument("parent", "NEW_PARENT")
@click.option(
    "--leave-original",
    is_flag=True,
    help="Keep the SubNamespace in the old parent (it is then in conflict) instead of deleting it.",
)
@write_options
def move_sub(
    ctx: click.Context,
    name: str,
    parent: str,
    leave_original: bool,
    dry_run: bool,
    accurate_namespace: str,
) -> None:
    """Move sub-namespace NS, with everything below it, under NEW_PARENT.

    NEW_PARENT must be a root or a sub-namespace outside NS's own tree. The SubNamespace in
    the old parent is deleted (unless --leave-original) and one is created in NEW_PARENT with
    the same spec.
    """

    def build(kube: Kube, namespaces: Namespaces) -> Change:
        found = namespaces.get(name)
        old_parent = changes.parent_label(found) if found else None
        original = get_subnamespace(kube, old_parent, name) if old_parent else None
        taken = get_subnamespace(kube, parent, name) is not None
        return changes.move(namespaces, name, parent, original, taken, leave_original)

    _run(ctx, build, dry_run, accurate_namespace)


@command(sub, "graft", "sub graft legacy-team team-a")
@namespace_argument("name", "NS")
@namespace_argument("parent", "PARENT")
@write_options
def graft_sub(
    ctx: click.Context, name: str, parent: str, dry_run: bool, accurate_namespace: str
) -> None:
    """Make NS, which is not a sub-namespace, a sub-namespace of PARENT.

    NS loses its type (root or template) and its template, and a SubNamespace for it is
    created in PARENT. A root keeps its sub-namespaces: the whole tree moves under PARENT.
    """

    def build(kube: Kube, namespaces: Namespaces) -> Change:
        taken = get_subnamespace(kube, parent, name) is not None
        return changes.graft(namespaces, name, parent, taken)

    _run(ctx, build, dry_run, accurate_namespace)


@command(sub, "cut", "sub cut team-a-dev")
@namespace_argument("name", "NS")
@write_options
def cut_sub(ctx: click.Context, name: str, dry_run: bool, accurate_namespace: str) -> None:
    """Make sub-namespace NS a new root; its sub-namespaces stay below it.

    The SubNamespace in the old parent is deleted; copies in update mode that came from the
    old parent are then deleted by the controller.
    """

    def build(kube: Kube, namespaces: Namespaces) -> Change:
        found = namespaces.get(name)
        parent = changes.parent_label(found) if found else None
        subnamespace = get_subnamespace(kube, parent, name) if parent else None
        return changes.cut(namespaces, name, subnamespace)

    _run(ctx, build, dry_run, accurate_namespace)


@root.command(epilog="\b\nExamples:\n  source <(kubectl-accurate completion bash)")
@click.argument("shell", type=click.Choice(SHELLS))
@generic_flags(shown=False)
def completion(shell: str) -> None:
    """Print the shell completion script for kubectl-accurate."""
    completer = get_completion_class(shell)
    if completer is None:
        raise CliError(f"no completion for {shell}")
    click.echo(completer(root, {}, "kubectl-accurate", COMPLETE_VAR).source())


def main() -> None:
    root.main(prog_name=PROG, complete_var=COMPLETE_VAR)


# Command groups kept in modules of their own register themselves on ``root`` when imported.
from kubectl_accurate import access, report, sudo  # noqa: E402, F401
