"""Scenario 11, start-up (issue 18): how long ``kubectl-accurate`` takes to start, in both forms
people install it, beside ``kubectl get ns -o name`` against the same small cluster.

The forms: the console script pip installs (the one on PATH) and the release binary krew
installs, built by ``krew/release.py build`` and unpacked from its archive as krew does. Each
command runs straight, not through ``kubectl accurate``: kubectl's plugin dispatch costs every
plugin the same. Warm runs follow each other with every file in the page cache; a cold run first
evicts the files of the form it runs (its executable, its libraries, and for the console script
the Python it runs on) from the page cache, as after a reboot or a long pause. Rounds are
interleaved: each round runs every command of every form once, and kubectl once, cold or warm
alike, so that a busy moment of the machine touches all of them.

The in-memory API server runs in a process of its own here (``Target.apart``), not in the
benchmark's: a ``list`` or a ``kubectl get`` is timed while it waits on the server, and a server
sharing the benchmark's CPU time and GIL answers later than one with a process to itself, as
every real API server has. With the server in the benchmark's process, this scenario gave
``list`` 1.42 to 1.51 times kubectl where interleaved runs against a server in a process of its
own gave 1.22 to 1.35 (bench/RESULTS.md, "Start-up, third pass"). On a real cluster
(ACCURATE_TEST_KUBECONFIG) the commands run against that cluster, as in every scenario.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from accurate_testbed.processes import environment
from bench import population
from bench.report import Row, median, seconds
from bench.target import Target
from libaccurate import __version__

if TYPE_CHECKING:  # bench.scenarios lists this scenario, so it cannot be imported at run time
    from bench.scenarios import Sizes

ROOT = Path(__file__).resolve().parents[1]
RELEASE = ROOT / "krew" / "release.py"
KUBECTL_ARGS = ("get", "ns", "-o", "name")
KUBECTL_FIGURE = " ".join(KUBECTL_ARGS)
COMMANDS = (("--version",), ("--help",), ("completion", "bash"), ("list",))
# Commands that only parse their command line: they must feel instant.
PARSE_ONLY = frozenset(" ".join(args) for args in COMMANDS[:3])
QUICK_LIMIT = 0.1  # seconds
LIST_RATIO = 1.2
NAMESPACES_PER_ROOT = 50


@dataclass
class Form:
    """One way of starting a program: its command lines by figure name, the files it reads,
    and the times each command line took, warm and cold."""

    name: str
    commands: Mapping[str, tuple[str, ...]]
    files: Sequence[Path]
    warm: dict[str, list[float]] = field(default_factory=dict)
    cold: dict[str, list[float]] = field(default_factory=dict)


def plugin(name: str, executable: Path, files: Sequence[Path]) -> Form:
    commands = {" ".join(args): (str(executable), *args) for args in COMMANDS}
    return Form(name, commands, files)


def _run(command: Sequence[str], env: dict[str, str]) -> float:
    """Wall time of one run; a failure stops the scenario, since its times would mean nothing."""
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {result.stderr}")
    return elapsed


def _files_under(paths: Sequence[Path]) -> Iterator[Path]:
    for path in paths:
        if path.is_file():
            yield path
        elif path.is_dir():
            yield from (p for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def evict(paths: Sequence[Path]) -> None:
    """Drop these files' pages from the page cache (only clean pages go: nothing is lost, and
    no privilege is needed), so that the next run reads them from disk."""
    for path in _files_under(paths):
        try:
            descriptor = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(descriptor)


def console_script(work: Path) -> Form:
    """The entry point as ``pip install`` makes it: a wheel of this tree installed into a
    virtualenv of its own, its dependencies those of this environment (through a ``.pth``
    line, so nothing is downloaded but the build backend). Not the development install: its
    import finder and the test tools' ``.pth`` files run at every start (30 ms and more of a
    ``--help``), which no user's install does."""
    wheels, venv = work / "wheel", work / "console"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    _build_step([*pip, "wheel", "--no-deps", "-w", str(wheels), str(ROOT)], work)
    _build_step([sys.executable, "-m", "venv", "--without-pip", str(venv)], work)
    python = venv / "bin" / "python"
    (wheel,) = wheels.glob("*.whl")
    _build_step([*pip, "--python", str(python), "install", "--no-deps", str(wheel)], work)
    asked = [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
    purelib = Path(_build_step(asked, work).strip())
    ours = sysconfig.get_paths()
    (purelib / "dependencies.pth").write_text(f"{ours['purelib']}\n")
    libraries = {ours[key] for key in ("stdlib", "platstdlib", "purelib")}
    files = [venv, Path(sys.executable).resolve(), *map(Path, libraries)]
    return plugin("console script", venv / "bin" / "kubectl-accurate", files)


def release_binary(work: Path) -> Form:
    """The binary of this machine's release archive, unpacked as krew unpacks it."""
    dist = work / "dist"
    _build_step(
        [sys.executable, str(RELEASE), "build", "--tag", f"v{__version__}", "--dist", str(dist)],
        work,
    )
    (archive,) = dist.glob("*.tar.gz")
    installed = work / "installed"
    with tarfile.open(archive) as tar:
        tar.extractall(installed, filter="data")
    return plugin("release binary", installed / "kubectl-accurate", [installed])


def _build_step(command: Sequence[str], work: Path) -> str:
    """One step of building a form, its output kept; its temporary files go into ``work``
    (TMPDIR), removed with it even when a Ctrl-C kills the step before it removes them."""
    env = {**os.environ, "TMPDIR": str(work)}
    return subprocess.run(command, check=True, capture_output=True, text=True, env=env).stdout


def _round(forms: Sequence[Form], env: dict[str, str], cold: bool) -> None:
    """Every command of every form once."""
    for form in forms:
        for figure, command in form.commands.items():
            if cold:
                evict(form.files)
            times = form.cold if cold else form.warm
            times.setdefault(figure, []).append(_run(command, env))


def _rows(name: str, form: Form, kubectl: Form) -> list[Row]:
    """Each command's median, warm and cold; ``list`` also as a multiple of kubectl's. Only
    the plugin's warm runs are judged: a cold start depends on the disk more than on us."""
    rows = []
    for state, times, reference in (
        ("warm", form.warm, median(kubectl.warm[KUBECTL_FIGURE])),
        ("cold", form.cold, median(kubectl.cold[KUBECTL_FIGURE])),
    ):
        judged = state == "warm" and form is not kubectl
        for figure, samples in times.items():
            taken = median(samples)
            label = f"{form.name}: {figure}, {state} (median)"
            if figure in PARSE_ONLY:
                met = taken < QUICK_LIMIT if judged else None
                rows.append(Row(name, label, seconds(taken), "< 100 ms" * judged, met))
                continue
            rows.append(Row(name, label, seconds(taken)))
            if form is not kubectl:
                ratio = taken / reference
                met = ratio <= LIST_RATIO if judged else None
                target = f"<= {LIST_RATIO}" * judged
                figure = f"{form.name}: list / kubectl {KUBECTL_FIGURE}, {state}"
                rows.append(Row(name, figure, f"{ratio:.2f}", target, met))
    return rows


def startup(target: Target, sizes: Sizes) -> list[Row]:
    """11: start-up of both install forms beside kubectl, warm and cold, against a server of
    its own (``Target.apart``)."""
    size = sizes.startup_namespaces
    with target.apart() as served:
        population.forest(served, max(1, size // NAMESPACES_PER_ROOT), size)
        work = served.scratch("startup-")
        env = environment(KUBECONFIG=str(served.kubeconfig), KUBECACHEDIR=f"{work}/cache")
        # pip compiles an installed package once; without .pyc files every run would compile
        # the plugin's modules again, which no user's machine does.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        found = Path(shutil.which("kubectl", path=env["PATH"]) or "kubectl")
        kubectl = Form("kubectl", {KUBECTL_FIGURE: (str(found), *KUBECTL_ARGS)}, [found])
        forms = [kubectl, console_script(work), release_binary(work)]
        for form in forms:  # discovery cached and every file read once, as on a user's machine
            for command in form.commands.values():
                _run(command, env)
        for _ in range(sizes.runs):
            _round(forms, env, cold=False)
            _round(forms, env, cold=True)
    name = f"11 start-up, {size} ns"
    return [row for form in forms for row in _rows(name, form, kubectl)]
