"""The ``kubectl accurate`` command tree: the Go plugin's commands, as a thin Click shell.

Each command reads what it needs (one LIST of namespaces, or the part a tenant may read; a
SubNamespace or two), asks ``changes`` what to write, and hands that to ``writes``; the rules
themselves live in libaccurate. Errors print as ``error: ...`` on stderr with exit code 1;
usage errors exit 2. ``-h``/``--help`` and ``help [COMMAND]`` work everywhere, as in kubectl.

Start-up time is most of what a user waits for on a small cluster (issue 18), so importing the
command tree loads click and the light modules that describe the command line (``arguments``,
``flags``, ``output``, ``completion``), and nothing heavy: YAML, TLS and HTTP load when a
command connects (``libaccurate.network.kube`` and ``kubeconfig`` import them there), and the
plugin's rules and write machinery inside the commands that use them, so ``list`` loads neither the
planner nor ``changes``. A new command follows the same rule: a command here imports what it
works with inside its body; a command with a module of its own is listed in ``DEFERRED`` and
its module is imported only when the command is used. ``tests/e2e/test_cli_startup.py`` holds
the budget.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import IO, TYPE_CHECKING, Any, NamedTuple, TypeVar

import click

from kubectl_accurate.arguments import TYPES
from kubectl_accurate.completion import SHELLS, completion_script
from kubectl_accurate.flags import GENERIC_FLAGS_NOTE, cache_dir, connect, generic_flags
from kubectl_accurate.output import OUTPUT_FORMATS, CliError, Printer
from libaccurate import __version__

if TYPE_CHECKING:
    from click.shell_completion import CompletionItem

    from kubectl_accurate.changes import Change
    from kubectl_accurate.namespaces import Namespaces
    from kubectl_accurate.subnamespace_api import SubNamespaceApi

F = TypeVar("F", bound=Callable[..., Any])
PROG = "kubectl accurate"
COMPLETE_VAR = "_KUBECTL_ACCURATE_COMPLETE"
HELP_OPTIONS = {"help_option_names": ["-h", "--help"]}
# The plugin's own failures, by module and class. A module never imported cannot have raised
# its error, so telling them apart needs no import (and a --help run loads none of them).
FAILURES = (
    ("kubectl_accurate.output", "CliError"),
    ("kubectl_accurate.changes", "Refused"),
    ("libaccurate.network.kubeconfig", "KubeError"),
    ("libaccurate.conversion", "ConversionError"),
)


class Group(click.Group):
    """A command group that knows kubectl-style aliases (``ns``, ``ls``)."""

    def __init__(self, *args: Any, aliases: Mapping[str, str] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.aliases = dict(aliases or {})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return super().get_command(ctx, self.aliases.get(cmd_name, cmd_name))


class Deferred(NamedTuple):
    """A command kept in a module of its own, imported only when that command is used (issue
    18: importing them all cost every start 25 ms). ``summary`` is the first paragraph of its
    help, which ``--help`` and shell completion list without importing the module;
    tests/unit/test_cli_commands.py checks it against the command's own help. A NamedTuple, as
    every record made at start-up: see docs/design-notes.md, "Start-up"."""

    module: str
    summary: str


# Each of these modules registers its command on ``root`` when imported.
DEFERRED = {
    "access": Deferred(
        "kubectl_accurate.access", "Grant, revoke, list and check access to a namespace tree."
    ),
    "quota": Deferred(
        "kubectl_accurate.quota_view",
        "Draw namespace trees with the hierarchical quotas (HRQs) that limit them.",
    ),
    "report": Deferred(
        "kubectl_accurate.report",
        "One row per namespace of every tree (or of ROOT's): its root, parent, depth, type, "
        "creation time, and each billing label's value with the namespace it came from.",
    ),
    "sudo": Deferred(
        "kubectl_accurate.sudo",
        "Run kubectl as admin of the tree NS is in, with your sudo grant there.",
    ),
}


class Root(Group):
    """The top group: loads a deferred command's module when the command is looked up, and
    turns the plugin's own failures, and a SubNamespace it cannot read in any version, into one
    ``error:`` line and exit 1."""

    def __init__(
        self, *args: Any, deferred: Mapping[str, Deferred] | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.deferred = dict(deferred or {})
        self._names_only = False

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.deferred})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        name = self.aliases.get(cmd_name, cmd_name)
        deferred = self.deferred.get(name)
        if deferred is not None and name not in self.commands:
            if self._names_only:
                return click.Command(name, help=deferred.summary)
            importlib.import_module(deferred.module)
        return super().get_command(ctx, name)

    @contextmanager
    def _listing(self) -> Iterator[None]:
        """While commands are only listed, a deferred one stands in by its name and summary."""
        self._names_only = True
        try:
            yield
        finally:
            self._names_only = False

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with self._listing():
            super().format_commands(ctx, formatter)

    def shell_complete(self, ctx: click.Context, incomplete: str) -> list[CompletionItem]:
        with self._listing():
            return super().shell_complete(ctx, incomplete)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except Exception as error:
            if _is_failure(error):
                raise Failed(str(error)) from error
            raise


class Failed(click.ClickException):
    """One of the plugin's own failures as click shows it: ``error: ...`` on stderr, exit 1."""

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"error: {self.format_message()}", file=file or sys.stderr)


def report(error: BaseException) -> None:
    """End the process as click ends it when a command of the tree raises ``error``, so that a
    command run without click (``kubectl_accurate.listing.run_straight``) fails the same way:
    the same message and exit code, a broken pipe or Ctrl-C treated as click treats them."""

    def fail() -> None:
        raise error

    Root(PROG, callback=fail, invoke_without_command=True).main([], prog_name=PROG)


def _is_failure(error: Exception) -> bool:
    loaded = (sys.modules.get(module) for module, _ in FAILURES)
    return any(
        isinstance(error, getattr(module, name))
        for module, (_, name) in zip(loaded, FAILURES, strict=True)
        if module is not None
    )


def _complete_namespaces(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """Namespace names for shell completion, using the flags typed so far."""
    from click.shell_completion import CompletionItem

    from kubectl_accurate.reads import read_namespaces
    from libaccurate.network.kube import KubeError

    try:
        api = _api(ctx)
        names = read_namespaces(api.kube, api, [None], below="named").by_name
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
        help="The namespace of accurate-controller, whose Deployment and config are read "
        "(the watched kinds; for sudo grants, whether sudo is on).",
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


def _api(ctx: click.Context) -> SubNamespaceApi:
    from kubectl_accurate.subnamespace_api import SubNamespaceApi

    return SubNamespaceApi(connect(ctx), cache_dir(ctx))


@click.group(
    cls=Root,
    deferred=DEFERRED,
    context_settings=HELP_OPTIONS,
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


@command(root, "list", "list", "list team-a -o yaml", "list --no-markers")
@namespace_argument("top", "[ROOT]", required=False)
@output_option
@click.option(
    "--markers/--no-markers",
    default=None,
    help="Mark how each namespace got there ([r] root, [s] SubNamespace, [g] grafted, "
    "[i] template instance, [!] broken), with a legend: the default when drawing, from a "
    "LIST of SubNamespaces sent alongside. With -o, --markers adds a markers list to each "
    "namespace.",
)
def list_trees(
    ctx: click.Context, top: str | None, output: str | None, markers: bool | None
) -> None:
    """List namespace trees (alias: ls).

    Without ROOT, every root namespace and the sub-namespaces below it; with ROOT, only the
    tree under that namespace. Drawn with markers, costs two LISTs sent together (namespaces
    and SubNamespaces) whatever the number of namespaces; with --no-markers or -o json|yaml,
    one. Without the right to list namespaces: the tree of ROOT, else the tree the current
    namespace is in, as far as you may read it; a sub-namespace that no SubNamespace made
    (grafted by its parent label alone) shows only when the current namespace is it or below
    it.
    """
    from kubectl_accurate import listing

    listing.list_trees(_api(ctx), top, output, markers)


sub.add_command(root.commands["list"], "list")


@command(template, "list", "template list", "template ls base")
@namespace_argument("top", "[TEMPLATE]", required=False)
@output_option
def list_templates(ctx: click.Context, top: str | None, output: str | None) -> None:
    """List template namespaces and their instances (alias: ls).

    Without TEMPLATE, every template that is not itself an instance of another template;
    with TEMPLATE, only the tree under it. Without the right to list namespaces, instances
    cannot be found: only the templates you may read from TEMPLATE (else the current
    namespace) up are shown.
    """
    from kubectl_accurate import listing

    namespaces = listing.view(_api(ctx), [top])
    forest = namespaces.forest
    tops = listing.shown_tops(forest.templates(), top, namespaces, "templates")
    listing.show_trees(tops, forest.instances, "instances", output)


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
    from kubectl_accurate.listing import view
    from kubectl_accurate.reads import CHILDREN_NOTE
    from kubectl_accurate.watched import find_watched

    api = _api(ctx)
    namespaces = view(api, [name], "named", CHILDREN_NOTE)
    if namespaces.get(name) is None:
        raise CliError(namespaces.missing(name))
    watched = find_watched(api.kube, accurate_namespace)
    found = describe.describe(api.kube, namespaces, name, watched, api)
    printer = Printer()
    if output:
        printer.data(found.to_data(), output)
    else:
        describe.show(printer, found)


# Writing commands


def _run(
    ctx: click.Context,
    names: list[str | None],
    build: Callable[[SubNamespaceApi, Namespaces], Change],
    dry_run: bool,
    accurate_namespace: str,
) -> None:
    """Read the namespaces (those in ``names`` at least), work out the change, then carry it
    out (or preview it)."""
    from kubectl_accurate import preview
    from kubectl_accurate.reads import read_namespaces
    from kubectl_accurate.watched import find_watched
    from kubectl_accurate.writes import carry_out

    api = _api(ctx)
    kube = api.kube
    namespaces = read_namespaces(kube, api, names)
    change = build(api, namespaces)
    printer = Printer()

    def show_preview() -> None:
        watched = find_watched(kube, accurate_namespace)
        preview.show(printer, preview.consequences(kube, change, namespaces, watched), watched)

    carry_out(api, change, namespaces.rules_forests, printer, dry_run, show_preview)


@command(namespace, "set-type", "ns set-type team-a root")
@namespace_argument("name", "NS")
@click.argument("kind", metavar="root|template|none", type=click.Choice(TYPES))
@write_options
def set_type(
    ctx: click.Context, name: str, kind: str, dry_run: bool, accurate_namespace: str
) -> None:
    """Make NS a root or a template namespace, or remove its type with "none"."""
    from kubectl_accurate import changes

    _run(ctx, [name], lambda _, ns: changes.set_type(ns, name, kind), dry_run, accurate_namespace)


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
    from kubectl_accurate import changes

    _run(
        ctx,
        [name, template_name],
        lambda _, ns: changes.set_template(ns, name, template_name),
        dry_run,
        accurate_namespace,
    )


@command(template, "unset", "template unset team-a")
@namespace_argument("name", "NS")
@write_options
def unset_template(ctx: click.Context, name: str, dry_run: bool, accurate_namespace: str) -> None:
    """Stop NS from using its template; copies in update mode will be deleted."""
    from kubectl_accurate import changes

    _run(ctx, [name], lambda _, ns: changes.unset_template(ns, name), dry_run, accurate_namespace)


def _pairs(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, str]:
    """``k=v,k2=v2`` (repeatable), read like the Go plugin's string-to-string flags."""
    import csv

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

    PARENT must be a root or a sub-namespace, and no namespace NAME may exist yet. What you
    may not read is not checked here; the API server and the webhook still judge it.
    """
    from kubectl_accurate import changes

    def build(_: SubNamespaceApi, namespaces: Namespaces) -> Change:
        return changes.create_sub(namespaces, name, parent, labels, annotations)

    _run(ctx, [parent, name], build, dry_run, accurate_namespace)


@command(sub, "delete", "sub delete team-a-dev")
@namespace_argument("name", "NAME")
@write_options
def delete_sub(ctx: click.Context, name: str, dry_run: bool, accurate_namespace: str) -> None:
    """Delete the SubNamespace of sub-namespace NAME; the controller then deletes namespace NAME."""
    from kubectl_accurate import changes

    def build(api: SubNamespaceApi, namespaces: Namespaces) -> Change:
        found = namespaces.get(name)
        parent = changes.parent_label(found) if found else None
        subnamespace = api.get(parent, name) if parent else None
        return changes.delete_sub(namespaces, name, subnamespace)

    _run(ctx, [name], build, dry_run, accurate_namespace)


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
    from kubectl_accurate import changes

    def build(api: SubNamespaceApi, namespaces: Namespaces) -> Change:
        found = namespaces.get(name)
        old_parent = changes.parent_label(found) if found else None
        original = api.get(old_parent, name) if old_parent else None
        taken = api.get(parent, name) is not None
        return changes.move(namespaces, name, parent, original, taken, leave_original)

    _run(ctx, [name, parent], build, dry_run, accurate_namespace)


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
    from kubectl_accurate import changes

    def build(api: SubNamespaceApi, namespaces: Namespaces) -> Change:
        taken = api.get(parent, name) is not None
        return changes.graft(namespaces, name, parent, taken)

    _run(ctx, [name, parent], build, dry_run, accurate_namespace)


@command(sub, "cut", "sub cut team-a-dev")
@namespace_argument("name", "NS")
@write_options
def cut_sub(ctx: click.Context, name: str, dry_run: bool, accurate_namespace: str) -> None:
    """Make sub-namespace NS a new root; its sub-namespaces stay below it.

    The SubNamespace in the old parent is deleted; copies in update mode that came from the
    old parent are then deleted by the controller.
    """
    from kubectl_accurate import changes

    def build(api: SubNamespaceApi, namespaces: Namespaces) -> Change:
        found = namespaces.get(name)
        parent = changes.parent_label(found) if found else None
        subnamespace = api.get(parent, name) if parent else None
        return changes.cut(namespaces, name, subnamespace)

    _run(ctx, [name], build, dry_run, accurate_namespace)


@command(root, "import-hnc", "import-hnc", "import-hnc -o yaml", "import-hnc --apply")
@click.option("--apply", "apply_", is_flag=True, help="Make the writes; without it, only plan.")
@click.option(
    "--hnc-namespace",
    default="hnc-system",
    show_default=True,
    help="The namespace HNC's controller runs in.",
)
@output_option
def import_hnc(ctx: click.Context, apply_: bool, hnc_namespace: str, output: str | None) -> None:
    """Move a cluster from HNC (the Hierarchical Namespace Controller) to Accurate.

    Reads HNC's trees, anchors, config and copies and prints the Accurate equivalent: labels,
    SubNamespaces, objects to opt in, HNC's copies to hand over, the controller config, what
    cannot be carried over, what --apply checks first, and the steps to move to Accurate and
    retire HNC. With --apply it writes (nothing is deleted; a second run writes nothing), once
    HNC's webhooks and controller are gone and the SubNamespace CRD is installed.
    """
    from kubectl_accurate import hnc_import

    hnc_import.run(_api(ctx), Printer(), apply_, output, hnc_namespace)


@root.command(
    epilog=(
        "\b\nExamples:\n  source <(kubectl-accurate completion bash)\n"
        "  kubectl-accurate completion powershell | Out-String | Invoke-Expression"
    )
)
@click.argument("shell", type=click.Choice(SHELLS))
@generic_flags(shown=False)
def completion(shell: str) -> None:
    """Print the shell completion script for kubectl-accurate."""
    click.echo(completion_script(root, shell, "kubectl-accurate", COMPLETE_VAR))


@root.command("help", epilog=epilog("help", "help sub create", note=""))
@click.argument("words", metavar="[COMMAND]...", nargs=-1)
@click.pass_context
def help_command(ctx: click.Context, words: tuple[str, ...]) -> None:
    """Show the help of kubectl accurate or of one of its commands."""
    shown = ctx.find_root()
    for word in words:
        group = shown.command
        found = group.get_command(shown, word) if isinstance(group, click.Group) else None
        if found is None:
            path = " ".join((shown.command_path, word))
            raise CliError(f"unknown command {path!r}; see '{PROG} --help'")
        shown = click.Context(found, info_name=word, parent=shown)
    click.echo(shown.get_help())


def main() -> None:
    root.main(prog_name=PROG, complete_var=COMPLETE_VAR)
