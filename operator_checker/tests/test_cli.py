"""The command, called in this process (``--no-isolate``, where the test
operators are registered already): its exit status, its one-line errors, and
the files it writes. test_isolation.py runs it as a process of its own."""

import json
import re

import pytest
import torch
from operator_checker.cli import main
from operator_checker.options import CHECKS, OUTCOMES
from operator_checker.report import JSON_FORMAT

from operator_checker import QUICK_CHECKS, save_samples


def check(target, samples, *options):
    return main(
        [target, "--import", "checker_operators", "--samples", str(samples)]
        + ["--device", "cpu", "--no-isolate", *options]
    )


def test_a_correct_operator_exits_0_and_writes_its_reports(
    samples_file, tmp_path, capsys, valid_report
):
    report, summary = tmp_path / "report.json", tmp_path / "summary.md"
    status = check(
        "oc_test::scale",
        samples_file,
        *["--only", "test_faketensor", "--only", "gradcheck"],
        *["--json", str(report), "--markdown", str(summary)],
    )
    assert status == 0
    assert "1 operator checked, 0 rows failed" in capsys.readouterr().out
    written = json.loads(report.read_text())
    assert {"format", "operators", "not_checked", "rows", "seconds"} <= set(written)
    assert written["format"] == JSON_FORMAT == "operator_checker.report/2"
    assert written["operators"][0]["operator"] == "oc_test::scale"
    assert written["operators"][0]["passed"] is True
    assert written["not_checked"] == []
    valid_report(written)
    fields = {"operator", "check", "variant", "at", "outcome", "detail", "fix"}
    assert all(set(row) == {*fields, "seconds"} for row in written["rows"])
    (gradcheck,) = [row for row in written["rows"] if row["check"] == "gradcheck"]
    assert gradcheck["at"] == {
        "sample": 0,
        "layout": "contiguous",
        "dtype": "float64",
        "device": "cpu",
        "grad": True,
    }
    assert gradcheck["seconds"] > 0
    environment = written["environment"]
    assert environment["torch"] == torch.__version__
    assert environment["devices"][0] == "cpu"
    assert (
        "torch._dynamo.config.capture_dynamic_output_shape_ops"
        in (environment["settings"])
    )
    assert {row["outcome"] for row in written["rows"]} <= set(OUTCOMES)
    ran = {row["check"] for row in written["rows"] if row["outcome"] == "passed"}
    assert ran == {"test_faketensor", "gradcheck"}
    table = summary.read_text()
    assert table.startswith("## operator_checker\n")
    assert "| `oc_test::scale` | passed | 0 |" in table


@pytest.mark.parametrize(
    ("target", "only", "said"),
    [
        ("oc_test::wrong_fake", "test_faketensor", "test_faketensor: failed"),
        ("oc_test::wrong_backward", "gradcheck", "Jacobian mismatch"),
    ],
)
def test_a_broken_operator_exits_1_naming_the_failure(
    samples_file, tmp_path, capsys, target, only, said
):
    report = tmp_path / "report.json"
    status = check(target, samples_file, "--only", only, "--json", str(report))
    assert status == 1
    printed = capsys.readouterr().out
    assert said in printed and " failed, " in printed.splitlines()[0]
    failed = [
        r for r in json.loads(report.read_text())["rows"] if r["outcome"] == "failed"
    ]
    assert failed and all(r["check"] == only and r["fix"] for r in failed)


def test_quick_runs_the_fast_checks_on_the_sample_as_given(
    samples_file, tmp_path, capsys
):
    report = tmp_path / "report.json"
    assert check("oc_test::scale", samples_file, "--quick", "--json", str(report)) == 0
    rows = json.loads(report.read_text())["rows"]
    ran = {r["check"] for r in rows if r["outcome"] == "passed"}
    assert ran == set(QUICK_CHECKS)
    assert {r["variant"] for r in rows if r["outcome"] == "passed"} == {
        "#0 contiguous float32 cpu"
    }
    skipped = {r["check"]: r["detail"] for r in rows if r["outcome"] == "skipped"}
    # "gradients" is what the calls found, never left out (nor run, here).
    assert set(skipped) == set(CHECKS[1:]) - set(QUICK_CHECKS) - {"gradients"}
    assert all("quick: not one of the fast checks" in d for d in skipped.values())
    assert "skipped (quick: not one of the fast checks): layout, " in (
        capsys.readouterr().out
    )


def test_dtype_narrows_the_precisions_checked(samples_file, tmp_path):
    report = tmp_path / "report.json"
    options = ["--dtype", "float64", "--only", "test_faketensor", "--json", str(report)]
    assert check("oc_test::scale", samples_file, *options) == 0
    rows = json.loads(report.read_text())["rows"]
    checked = {r["variant"] for r in rows if r["check"] == "test_faketensor"}
    # The sample in its own dtype (float32), and float64 derived from it.
    assert {variant.split()[2] for variant in checked} == {"float32", "float64"}


def test_samples_from_a_function_of_a_module_or_of_a_file(tmp_path):
    assert (
        check("oc_test::scale", "checker_operators:scale_samples", "--only", "vmap")
        == 0
    )
    made_here = tmp_path / "more_samples.py"
    made_here.write_text(
        "import torch\n\ndef samples():\n    return [(torch.ones(2, 3), 0.5)]\n"
    )
    assert check("oc_test::scale", f"{made_here}:samples", "--only", "vmap") == 0


@pytest.fixture
def misfit_samples(tmp_path):
    """Samples of oc_test::scale without its second argument."""
    path = tmp_path / "misfit.pt"
    save_samples(path, {"oc_test::scale": [(torch.ones(2),)]})
    return path


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["oc_test::nothing"], "oc_test::nothing: no operator oc_test::nothing"),
        (["oc_test::scale", "--import", "no_such_module_here"],
         "--import no_such_module_here failed: ModuleNotFoundError"),
        (["oc_test::scale", "--samples", "no/such/samples.pt"],
         "--samples no/such/samples.pt: no such file"),
        (["oc_test::scale", "--samples", "MISFIT"], "argument 'factor' missing"),
        (["aten::relu"], "holds no samples for aten::relu"),
        (["oc_test::scale", "--only", "gradchek"], "--only gradchek: not a check"),
        (["oc_test::scale", "--skip", "float17"],
         "skip: 'float17' is not a check, a layout, a dtype or a device (did "
         "you mean 'float16'?)"),
        (["oc_test::scale", "--dtype", "float8"], "--dtype float8: not one of"),
    ],
)  # fmt: skip
def test_what_cannot_run_exits_2_with_one_line(
    samples_file, misfit_samples, capsys, arguments, message
):
    if "--samples" not in arguments:
        arguments = [*arguments, "--samples", str(samples_file)]
    arguments = [str(misfit_samples) if a == "MISFIT" else a for a in arguments]
    assert main([*arguments, "--no-isolate"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("operator_checker: error: ")
    assert message in line


def test_help_exits_0_and_gives_the_exit_statuses(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    assert (
        "exit status: 0 ok, 1 rows failed, 2 cannot run, 3 internal error, 5 "
        "nothing checked, 130 interrupted." in capsys.readouterr().out
    )


# -- The exit contract: one meaning per status, never a traceback -------------

SAMPLE_FUNCTIONS = """
import os
import torch


def wrong_key():
    return {"oc_test::wrong_fake": [(torch.ones(2, 3), 2.0)]}


def raises():
    raise RuntimeError("boom in my sample factory")


def returns_none():
    return None


def returns_ints():
    return [1, 2]


def wrong_type():
    return [(torch.ones(2, 3), "two")]


def records_its_process():
    with open(os.environ["SAMPLES_PID_FILE"], "w") as file:
        file.write(str(os.getpid()))
    return [(torch.ones(2, 3), 2.0)]
"""


@pytest.fixture
def functions(tmp_path):
    path = tmp_path / "sample_functions.py"
    path.write_text(SAMPLE_FUNCTIONS)
    return path


@pytest.mark.parametrize(
    ("function", "message"),
    [
        ("wrong_key", "holds no samples for oc_test::scale; it holds "
                      "oc_test::wrong_fake"),
        ("raises", "raises() raised RuntimeError: boom in my sample factory"),
        ("returns_none", "returns_none() returned NoneType; expected "
                         "{operator: [samples]} or a list of tuples"),
        ("returns_ints", "returns_ints() returned a list holding int"),
        ("wrong_type", "argument 'factor' of oc_test::scale is float, but the "
                       "sample gives str 'two'"),
    ],
)  # fmt: skip
def test_samples_that_do_not_fit_are_the_samples_fault_exit_2(
    functions, capsys, function, message
):
    status = check("oc_test::scale", f"{functions}:{function}", "--only", "vmap")
    assert status == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(
        f"operator_checker: error: oc_test::scale: --samples {functions}:"
    )
    assert message in line


def test_a_corrupt_samples_file_names_the_file_and_exits_2(tmp_path, capsys):
    corrupt = tmp_path / "corrupt.pt"
    corrupt.write_bytes(b"\x9f not a pickle at all")
    assert check("oc_test::scale", corrupt, "--only", "vmap") == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert f"--samples {corrupt} is not a samples file written by" in line


def test_a_report_path_that_cannot_be_written_stops_before_the_run(
    samples_file, tmp_path, capsys, monkeypatch
):
    from operator_checker import cli

    monkeypatch.setattr(cli, "in_process", lambda jobs: pytest.fail("it ran"))
    nowhere = tmp_path / "no" / "such" / "folder" / "report.json"
    assert check("oc_test::scale", samples_file, "--json", str(nowhere)) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        f"operator_checker: error: --json {nowhere}: no such folder {nowhere.parent}"
    )


def test_a_bug_of_the_checker_exits_3_in_one_line(samples_file, capsys, monkeypatch):
    from operator_checker import cli

    def broken(jobs):
        raise KeyError("a bug of ours")

    monkeypatch.setattr(cli, "in_process", broken)
    assert check("oc_test::scale", samples_file, "--only", "vmap") == 3
    (line,) = capsys.readouterr().err.splitlines()
    assert line == "operator_checker: error: internal: KeyError: 'a bug of ours'"


def test_a_run_that_checks_nothing_exits_5(samples_file, capsys):
    # Every check left out by the options: said before anything runs.
    assert (
        check("oc_test::scale", samples_file, "--only", "vmap", "--skip", "vmap") == 5
    )
    assert "nothing to check" in capsys.readouterr().err
    # Every variant left out: the run said so in its rows, and checked nothing.
    assert check("oc_test::scale", samples_file, "--only", "vmap", "--skip", "cpu") == 5
    out, err = capsys.readouterr()
    assert "nothing was checked" in err
    # Never "passed" on a report that checked nothing.
    assert re.match(r"oc_test::scale: \d+ variants, nothing checked, ", out), out
    assert "0 operators checked, 1 with nothing checked, 0 rows failed" in out


def test_naming_a_device_this_machine_lacks_is_valid_and_said(samples_file, tmp_path):
    report = tmp_path / "report.json"
    options = ["--quick", "--skip", "mps", "--json", str(report)]
    assert check("oc_test::scale", samples_file, *options) == 0
    (row,) = [
        row
        for row in json.loads(report.read_text())["rows"]
        if row["detail"].startswith("mps:")
    ]
    assert row["outcome"] == "skipped"
    assert row["detail"] == "mps: --skip (and mps is not present here)"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["oc_test::scal"], "no operator oc_test::scal (did you mean oc_test::scale?)"),
        (["oc_test::scale", "--skip", "bf16"], "(did you mean 'bfloat16'?)"),
        (["oc_test::scale", "--only", "eager"], "--only eager: not a check one can"),
        (["oc_test::scale", "--only", "gradchek"],
         "--only gradchek: not a check one can run (did you mean gradcheck?)"),
        (["oc_test::scale", "--device", "tpu"], "--device tpu: not a device type"),
    ],
)  # fmt: skip
def test_near_misses_get_a_suggestion(samples_file, capsys, arguments, message):
    assert main([*arguments, "--samples", str(samples_file), "--no-isolate"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert message in line


@pytest.mark.parametrize("seconds", ["0", "-3", "soon"])
def test_the_timeout_must_be_a_positive_number(samples_file, capsys, seconds):
    with pytest.raises(SystemExit) as exited:
        check("oc_test::scale", samples_file, "--timeout", seconds)
    assert exited.value.code == 2
    assert "--timeout" in capsys.readouterr().err


def test_each_check_left_out_says_its_own_reason(samples_file, tmp_path):
    report = tmp_path / "report.json"
    options = [
        "--quick",
        "--only",
        "gradcheck",
        "--only",
        "vmap",
        "--json",
        str(report),
    ]
    assert check("oc_test::scale", samples_file, *options) == 0
    skipped = {
        row["check"]: row["detail"]
        for row in json.loads(report.read_text())["rows"]
        if row["outcome"] == "skipped"
    }
    assert skipped["gradcheck"] == "gradcheck: quick: not one of the fast checks"
    assert skipped["test_schema"] == "test_schema: left out by only="


def test_json_to_stdout_and_the_command_as_it_was_typed(samples_file, capsys):
    arguments = ["oc_test::scale", "--import", "checker_operators"]
    arguments += ["--samples", str(samples_file), "--quick", "--no-isolate"]
    assert main([*arguments, "--json", "-"], prog="operator-checker") == 0
    out, err = capsys.readouterr()
    written = json.loads(out)  # stdout holds the JSON alone
    assert written["command"] == ["operator-checker", *arguments, "--json", "-"]
    assert "1 operator checked" in err
    with pytest.raises(SystemExit):
        main(["--help"], prog="operator-checker")
    assert capsys.readouterr().out.startswith("usage: operator-checker ")


# -- Output formats ---------------------------------------------------------------


def test_github_annotations_point_at_the_operators_definition(samples_file, capsys):
    status = check("oc_test::wrong_fake", samples_file, "--only", "test_faketensor",
                   "--output-format", "github")  # fmt: skip
    assert status == 1
    out, err = capsys.readouterr()
    # One annotation per group of failed rows: the wrong size, and the size
    # it computes for an empty input.
    line, empty = out.splitlines()
    import os

    import checker_operators

    code = checker_operators.wrong_fake._init_fn.__code__
    file = os.path.relpath(code.co_filename)  # under the working folder
    assert line.startswith(
        f"::error file={file},line={code.co_firstlineno},"
        "title=oc_test%3A%3Awrong_fake test_faketensor%3A failed::"
    )
    assert " and 10 more: MetadataMismatchError" in line
    assert "(fix: Troubleshooting Custom Operators > The two detectors)" in line
    assert "negative dimension" in empty
    assert "oc_test::wrong_fake: " in err  # the text report, on stderr


def test_junit_has_a_test_case_per_operator_and_check(samples_file, capsys):
    from xml.etree import ElementTree

    status = check("oc_test::wrong_fake", samples_file, "--output-format", "junit",
                   "--only", "test_faketensor", "--only", "vmap")  # fmt: skip
    assert status == 1
    suite = ElementTree.fromstring(capsys.readouterr().out)
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert set(cases) >= {
        "oc_test::wrong_fake[test_faketensor]",
        "oc_test::wrong_fake[vmap]",
        "oc_test::wrong_fake[gradcheck]",
    }
    assert cases["oc_test::wrong_fake[test_faketensor]"].find("failure") is not None
    assert cases["oc_test::wrong_fake[vmap]"].find("failure") is None
    assert cases["oc_test::wrong_fake[gradcheck]"].find("skipped") is not None
    assert suite.get("failures") == "1"


def test_the_markdown_summary_groups_rows_as_the_text_does(samples_file, tmp_path):
    summary = tmp_path / "summary.md"
    options = ["--only", "test_faketensor", "--markdown", str(summary)]
    assert check("oc_test::wrong_fake", samples_file, *options) == 1
    failed = summary.read_text().split("### Failed")[1]
    rows = [line for line in failed.splitlines() if line.startswith("| `")]
    assert len(rows) == 2, rows  # a cause per row: the shape, and an empty size
    assert "| test_faketensor | #0 contiguous float32 cpu and 10 more |" in rows[0]
