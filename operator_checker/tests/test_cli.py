"""The command, called in this process (``--no-isolate``, where the test
operators are registered already): its exit status, its one-line errors, and
the files it writes. test_isolation.py runs it as a process of its own."""

import json

import pytest
import torch
from operator_checker.cli import main
from operator_checker.report import CHECKS, OUTCOMES

from operator_checker import QUICK_CHECKS, save_samples


def check(target, samples, *options):
    return main(
        [target, "--import", "checker_operators", "--samples", str(samples)]
        + ["--device", "cpu", "--no-isolate", *options]
    )


def test_a_correct_operator_exits_0_and_writes_its_reports(
    samples_file, tmp_path, capsys
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
    assert written["format"] == "operator_checker.report/1"
    assert written["operators"][0]["operator"] == "oc_test::scale"
    assert written["operators"][0]["passed"] is True
    assert written["not_checked"] == []
    fields = {"operator", "check", "variant", "outcome", "detail", "fix"}
    assert all(set(row) == fields for row in written["rows"])
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
    assert checked and all("float64" in variant for variant in checked), checked


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
        (["oc_test::scale", "--skip", "float17"], "skip: 'float17' is none of"),
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
    assert "exit status: 0 no row failed, 1 a row failed, 2" in capsys.readouterr().out
