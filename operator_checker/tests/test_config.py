"""``[tool.operator_checker]`` in pyproject.toml, and the declarations the
command takes: found as ruff and pytest find theirs, checked as strictly."""

import json

import pytest
from operator_checker.cli import main
from operator_checker.config import ConfigError, find, load

from operator_checker import save_samples

PYPROJECT = """
[project]
name = "myproject"

[tool.operator_checker]
targets = ["oc_test::scale", "oc_test::wrong_fake"]
imports = ["checker_operators"]
samples = "{samples}"
only = ["test_faketensor", "gradcheck"]
devices = ["cpu"]
dtypes = ["float32"]
isolate = false
json = "reports/report.json"

[tool.operator_checker."oc_test::wrong_fake"]
limitations = {{test_faketensor = "the fake kernel is known to be one row short"}}
skip = {{gradcheck = "not trained"}}
"""


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project whose pyproject.toml names two operators; the command runs
    from a folder below it."""
    import torch

    save_samples(
        tmp_path / "samples.pt",
        {
            "oc_test::scale": [(torch.randn(3, 4), 2.0)],
            "oc_test::wrong_fake": [(torch.randn(3, 4), 2.0)],
        },
    )
    (tmp_path / "reports").mkdir()
    (tmp_path / "pyproject.toml").write_text(PYPROJECT.format(samples="samples.pt"))
    below = tmp_path / "src" / "deeper"
    below.mkdir(parents=True)
    monkeypatch.chdir(below)
    return tmp_path


def test_the_command_with_no_target_checks_what_pyproject_names(project, capsys):
    assert find() == project / "pyproject.toml"
    # wrong_fake's failures are declared limitations: nothing fails.
    assert main([]) == 0
    written = json.loads((project / "reports" / "report.json").read_text())
    assert [op["operator"] for op in written["operators"]] == [
        "oc_test::scale",
        "oc_test::wrong_fake",
    ]
    rows = [r for r in written["rows"] if r["operator"] == "oc_test::wrong_fake"]
    faketensor = [r for r in rows if r["check"] == "test_faketensor"]
    assert faketensor and {r["outcome"] for r in faketensor} == {"limitation"}
    assert all("one row short" in r["detail"] for r in faketensor)
    (skipped,) = [r for r in rows if r["check"] == "gradcheck"]
    assert skipped["detail"] == "gradcheck: not trained"
    # The declarations are the operator's own: scale's gradcheck ran.
    assert any(
        r["check"] == "gradcheck" and r["outcome"] == "passed"
        for r in written["rows"]
        if r["operator"] == "oc_test::scale"
    )


def test_the_command_line_takes_precedence_and_adds_declarations(project):
    report = project / "cli.json"
    arguments = ["oc_test::wrong_fake", "--only", "vmap", "--only", "test_faketensor"]
    arguments += ["--skip", "test_faketensor=not today", "--json", str(report)]
    assert main(arguments) == 0
    written = json.loads(report.read_text())
    # The targets, the checks and the report path of the command line.
    assert [op["operator"] for op in written["operators"]] == ["oc_test::wrong_fake"]
    ran = {r["check"] for r in written["rows"] if r["outcome"] == "passed"}
    assert ran == {"vmap"}
    # Its declaration added to the file's.
    (skipped,) = [r for r in written["rows"] if r["check"] == "test_faketensor"]
    assert skipped["detail"] == "test_faketensor: not today"


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('quik = true', "unknown key 'quik' (did you mean quick?)"),
        ('quick = "yes"', "quick must be bool, not str"),
        ('[tool.operator_checker."oc_test::scale"]\nskipp = {}',
         "[tool.operator_checker.\"oc_test::scale\"]: unknown key 'skipp' (did you "
         "mean skip?)"),
        ('[tool.operator_checker."oc_test::scale"]\nskip = {float16 = 3}',
         "skip.float16 must be a reason (a string)"),
    ],
)  # fmt: skip
def test_an_unknown_or_mistyped_key_is_an_error_naming_it(
    tmp_path, monkeypatch, capsys, table, message
):
    (tmp_path / "pyproject.toml").write_text(
        f'[tool.operator_checker]\ntargets = ["oc_test::scale"]\n{table}\n'
    )
    monkeypatch.chdir(tmp_path)
    assert main([]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"operator_checker: error: {tmp_path / 'pyproject.toml'}: ")
    assert message in line


def test_without_a_target_anywhere_the_command_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert load().path is None
    assert main([]) == 2
    assert "no TARGET" in capsys.readouterr().err


def test_declarations_need_a_reason_and_name_what_exists(samples_file, capsys):
    common = ["--samples", str(samples_file), "--import", "checker_operators"]
    common += ["--no-isolate", "--quick"]
    assert main(["oc_test::scale", "--limitation", "gradcheck", *common]) == 2
    assert "--limitation gradcheck: write NAME=REASON" in capsys.readouterr().err
    assert main(["oc_test::scale", "--nondifferentiable", "y=no", *common]) == 2
    err = capsys.readouterr().err
    assert "nondifferentiable: oc_test::scale has no argument 'y'" in err


def test_a_configuration_error_is_a_config_error():
    with pytest.raises(ConfigError, match="no such file"):
        load("no/such/pyproject.toml")
