"""accurate-controller's command line read the way the Go controller's pflag reads it (issue 13):
what each spelling of a flag makes the controller do, and the usage errors of what it refuses.
Starting the process with the Go chart's arguments is tests/e2e/test_controller_go_flags.py."""

from __future__ import annotations

import pytest

from controller.options import Options, parse


def refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The usage error for ``argv``: exit status 2 and a message on stderr."""
    with pytest.raises(SystemExit) as exit:
        parse(argv)
    assert exit.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize("text", ["1", "t", "T", "TRUE", "true", "True"])
def test_every_spelling_of_true(text: str) -> None:
    assert parse([f"--webhook-allow-cascading-deletion={text}"]).allow_cascading_deletion


@pytest.mark.parametrize("text", ["0", "f", "F", "FALSE", "false", "False"])
def test_every_spelling_of_false(text: str) -> None:
    assert not parse([f"--leader-election={text}"]).leader_election


def test_a_boolean_alone_is_true_and_the_default_is_false() -> None:
    assert parse(["--webhook-allow-cascading-deletion"]).allow_cascading_deletion
    assert not parse([]).allow_cascading_deletion


def test_a_boolean_takes_no_separate_value(capsys: pytest.CaptureFixture[str]) -> None:
    message = refused(["--webhook-allow-cascading-deletion", "false"], capsys)
    assert "unexpected argument 'false'" in message
    assert "--flag=false" in message


@pytest.mark.parametrize("text", ["yes", "", "on"])
def test_other_boolean_values_are_refused(text: str, capsys: pytest.CaptureFixture[str]) -> None:
    message = refused([f"--webhook-allow-cascading-deletion={text}"], capsys)
    assert f'invalid argument "{text}" for "--webhook-allow-cascading-deletion" flag' in message


@pytest.mark.parametrize(
    "argv",
    [["--config-file", "/c.yaml"], ["--config-file=/c.yaml"], ["--config_file=/c.yaml"]],
)
def test_a_value_after_equals_or_as_the_next_argument(argv: list[str]) -> None:
    assert parse(argv).config_file == "/c.yaml"


def test_the_next_argument_is_the_value_even_if_it_looks_like_a_flag() -> None:
    assert parse(["--leader-election-id", "--odd"]).leader_election_id == "--odd"


def test_double_dash_ends_the_flags() -> None:
    assert parse(["--workers=2", "--"]).workers == 2


def test_a_later_flag_wins() -> None:
    assert parse(["--workers=2", "--workers", "5"]).workers == 5


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1m30s", 90.0),
        ("500ms", 0.5),
        ("1.5h", 5400.0),
        ("2h45m", 9900.0),
        (".5s", 0.5),
        ("1500000us", 1.5),
        ("2000000000ns", 2.0),
        ("90", 90.0),
        ("0.25", 0.25),
    ],
)
def test_durations_read_like_go(text: str, seconds: float) -> None:
    assert parse([f"--resync-period={text}"]).resync_period == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["soon", "10x", "1m30", "-1s", "0", "0s", "s", "", "nan", "inf"])
def test_bad_durations_name_the_flag(text: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert '"--resync-period" flag' in refused([f"--resync-period={text}"], capsys)


@pytest.mark.parametrize(
    ("argv", "log_format", "log_level"),
    [
        ([], "auto", "info"),
        (["--zap-log-level=5"], "auto", "debug"),
        (["--zap-log-level", "1"], "auto", "debug"),
        (["--zap-log-level=debug"], "auto", "debug"),
        (["--zap-log-level=error"], "auto", "error"),
        (["--zap-log-level=panic"], "auto", "error"),
        (["--zap-encoder=json"], "json", "info"),
        (["--zap-encoder=console"], "text", "info"),
        (["--zap-devel"], "text", "debug"),
        (["--zap-devel=false"], "auto", "info"),
        (["--zap-devel", "--zap-encoder=json", "--zap-log-level=info"], "json", "info"),
        (["--zap-log-level=debug", "--log-level=warn"], "auto", "warn"),
        (["--log-format=text", "--zap-encoder=json"], "text", "info"),
    ],
)
def test_zap_flags_set_our_logging(argv: list[str], log_format: str, log_level: str) -> None:
    options = parse(argv)
    assert (options.log_format, options.log_level) == (log_format, log_level)


@pytest.mark.parametrize(
    "argv",
    [["-v=2"], ["-v", "2"], ["-v2"], ["--v=2"], ["--v", "2"]],
)
def test_klog_verbosity_in_every_pflag_spelling_is_accepted_and_ignored(argv: list[str]) -> None:
    options = parse(argv)
    assert options.ignored == ("-v",)
    assert options.log_level == "info"


def test_ignored_flags_are_listed_once_each_in_order() -> None:
    options: Options = parse(
        ["--logtostderr", "--zap-time-encoding=rfc3339", "--logtostderr=true", "--log_dir=/l"]
    )
    assert options.ignored == ("--logtostderr", "--zap-time-encoding", "--log_dir")


def test_meaningful_flags_are_not_listed_as_ignored() -> None:
    options = parse(["--zap-devel", "--zap-log-level=5", "--webhook-allow-cascading-deletion"])
    assert options.ignored == ()


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--zap-log-level=0"], "--zap-log-level"),
        (["--zap-log-level=verbose"], "--zap-log-level"),
        (["--zap-encoder=xml"], "--zap-encoder"),
        (["--zap-stacktrace-level=debug"], "--zap-stacktrace-level"),
        (["--zap-time-encoding=unix"], "--zap-time-encoding"),
        (["-v=high"], "-v, --v"),
        (["--vmodule=reconciler"], "--vmodule"),
        (["--stderrthreshold=LOUD"], "--stderrthreshold"),
        (["--log_file_max_size=-1"], "--log_file_max_size"),
        (["--apiserver-qps-throttle=nan"], "--apiserver-qps-throttle"),
        (["--apiserver-qps-throttle=inf"], "--apiserver-qps-throttle"),
        (["--feature-gates=DisablePropagateGenerated"], "--feature-gates"),
        (["--feature-gates=AllGamma=true"], "--feature-gates"),
    ],
)
def test_malformed_values_of_accepted_flags_are_refused(
    argv: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert f'for "{named}" flag' in refused(argv, capsys)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--no-such-flag"], "unknown flag: --no-such-flag"),
        (["--no-such-flag=1"], "unknown flag: --no-such-flag"),
        (["-x"], "unknown shorthand flag: 'x' in -x"),
        (["-zap-devel"], "unknown shorthand flag: 'z' in -zap-devel"),
        (["---workers=2"], "bad flag syntax: ---workers=2"),
        (["--workers"], "flag needs an argument: --workers"),
        (["-v"], "flag needs an argument: -v, --v"),
        (["stray"], "unexpected argument 'stray'"),
        (["--", "--workers=2"], "unexpected argument '--workers=2'"),
    ],
)
def test_what_pflag_refuses_is_a_usage_error(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert message in refused(argv, capsys)


@pytest.mark.parametrize(
    ("gates", "propagate_generated"),
    [
        ("", False),
        ("DisablePropagateGenerated=false", True),
        ("AllBeta=false", True),
        ("AllBeta=false,DisablePropagateGenerated=true", False),
        ("DisablePropagateGenerated=true,AllBeta=false", False),
        ("AllAlpha=true", False),
    ],
)
def test_feature_gates_as_kubernetes_components_read_them(
    gates: str, propagate_generated: bool
) -> None:
    """AllBeta sets every beta gate (DisablePropagateGenerated is one) not named on its own."""
    assert parse([f"--feature-gates={gates}"]).propagate_generated is propagate_generated


def test_help_lists_the_go_flags(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit:
        parse(["-h"])
    shown = capsys.readouterr().out
    assert exit.value.code == 0
    for flag in ("--zap-log-level", "--webhook-allow-cascading-deletion", "-v, --v", "--vmodule"):
        assert flag in shown
