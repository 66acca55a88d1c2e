"""An operator swapping the Go Accurate's image for ours keeps the Deployment's arguments (issue
13): the controller starts with every argument list the Go Helm chart renders, and says once
which of them it accepts but ignores.

The lists are those of the Go chart's templates/deployment.yaml in its releases: at first only
``controller.extraArgs`` (empty by default), later the value of webhook.allowCascadingDeletion
as ``--webhook-allow-cascading-deletion`` followed by them; with the Go e2e suite's values
(``extraArgs: [--zap-log-level=5]``) and the logging flags the chart's users pass.
"""

from __future__ import annotations

import pytest

from tests.e2e.controller import Controllers, Scene

IGNORED_MESSAGE = "ignoring flags accepted only for compatibility with the Go Accurate"
E2E_VALUES = ("--zap-log-level=5",)
LOGGING = ("--zap-devel", "--zap-encoder=json", "-v=2", "--logtostderr")
DEBUG = {"--zap-log-level=5", "--zap-devel", "debug"}

CHART_ARGUMENTS = {
    "extraArgs only, defaults": ((), ()),
    "extraArgs only, e2e values": (E2E_VALUES, ()),
    "cascading deletion off": (("--webhook-allow-cascading-deletion=false",), ()),
    "cascading deletion on": (("--webhook-allow-cascading-deletion=true",), ()),
    "cascading deletion on, bare": (("--webhook-allow-cascading-deletion",), ()),
    "cascading deletion off, e2e values": (
        ("--webhook-allow-cascading-deletion=false", *E2E_VALUES),
        (),
    ),
    "logging flags": (
        ("--webhook-allow-cascading-deletion=false", *LOGGING),
        ("-v", "--logtostderr"),
    ),
    "every zap and klog flag": (
        (
            "--zap-devel=false",
            "--zap-encoder",
            "console",
            "--zap-log-level",
            "debug",
            "--zap-stacktrace-level=panic",
            "--zap-time-encoding=iso8601",
            "--v",
            "4",
            "--vmodule=reconciler=3,cache*=2",
            "--logtostderr=false",
            "--alsologtostderr",
            "--log_dir=/tmp",
            "--log-file-max-size=10",
            "--stderrthreshold=WARNING",
            "--skip_headers",
            "--add_dir_header=true",
        ),
        (
            "--zap-stacktrace-level",
            "--zap-time-encoding",
            "-v",
            "--vmodule",
            "--logtostderr",
            "--alsologtostderr",
            "--log_dir",
            "--log_file_max_size",
            "--stderrthreshold",
            "--skip_headers",
            "--add_dir_header",
        ),
    ),
}


@pytest.mark.parametrize("case", CHART_ARGUMENTS, ids=list(CHART_ARGUMENTS))
def test_the_controller_starts_with_the_go_charts_arguments(
    controllers: Controllers, scene: Scene, case: str
) -> None:
    arguments, ignored = CHART_ARGUMENTS[case]

    running = controllers.start("", *arguments, lease_namespace=scene.namespace("lease"))

    records = running.records()
    said = [r for r in records if r["msg"] == IGNORED_MESSAGE]
    if ignored:
        assert [r["flags"] for r in said] == [list(ignored)]
        assert said[0]["level"] == "info"
    else:
        assert said == []
    # --zap-log-level above 0, "debug", or --zap-devel: debug records (of the HTTP client at
    # least, which logs every request at debug level) show.
    debug = any(r["level"] == "debug" for r in records)
    assert debug == any(a in DEBUG for a in arguments)
