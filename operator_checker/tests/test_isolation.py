"""Isolation: a crash or a hang of the operator is a failed row naming the
signal and the variant, and the other checks go on in a fresh child process.

Each child imports torch (seconds): every run here checks two cheap checks
on one small sample."""

import json
import os
import subprocess
import sys

import pytest
import torch
from operator_checker.isolation import JobError, target_of

from operator_checker import check_operator, isolation

CHEAP_CHECKS = ["test_faketensor", "gradcheck"]


def rows_of(rows, operator):
    return [row for row in rows if row["operator"] == operator]


def assert_the_checks_went_on_after(rows, failed):
    after = rows[rows.index(failed) + 1 :]
    passed = {row["check"] for row in after if row["outcome"] == "passed"}
    assert passed == set(CHEAP_CHECKS)
    assert [row for row in after if row["outcome"] == "failed"] == []


# Long enough for a fresh child's first call of a check (imports torch makes
# on first use take seconds on a loaded machine), short against the hang.
HANG_TIMEOUT = 30


def test_the_command_survives_a_crash_and_a_hang(
    samples_file, operators_file, tmp_path
):
    report = tmp_path / "report.json"
    command = [sys.executable, "-m", "operator_checker"]
    command += ["oc_test::crash_on_empty", "oc_test::hang_on_empty"]
    command += ["--import", operators_file, "--samples", str(samples_file)]
    command += ["--only", CHEAP_CHECKS[0], "--only", CHEAP_CHECKS[1]]
    command += ["--device", "cpu", "--timeout", str(HANG_TIMEOUT)]
    command += ["--json", str(report)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)

    assert done.returncode == 1, done.stdout + done.stderr  # a row failed
    assert "2 operators checked, 2 rows failed" in done.stdout
    rows = json.loads(report.read_text())["rows"]
    crashed = rows_of(rows, "oc_test::crash_on_empty")
    (crash,) = [row for row in crashed if row["outcome"] == "failed"]
    assert (crash["check"], crash["variant"]) == ("eager", "#0 empty cpu")
    assert crash["detail"].startswith("crashed the process: SIGSEGV on #0 empty cpu")
    assert_the_checks_went_on_after(crashed, crash)
    hung = rows_of(rows, "oc_test::hang_on_empty")
    (hang,) = [row for row in hung if row["outcome"] == "failed"]
    assert (hang["check"], hang["variant"]) == ("eager", "#0 empty cpu")
    assert hang["detail"].startswith(
        f"hung: no result within {HANG_TIMEOUT} s (timeout) on #0 empty cpu"
    )
    assert_the_checks_went_on_after(hung, hang)


def test_isolate_true_from_python_reports_the_crash_the_same_way(operators_file):
    report = check_operator(
        "oc_test::crash_on_empty",
        [(torch.randn(3, 4), 2.0)],
        imports=[operators_file],
        isolate=True,
        only=CHEAP_CHECKS,
        devices=["cpu"],
        dtypes=[torch.float32],
    )
    rows = [vars(row) for row in report.rows]
    (crash,) = [row for row in rows if row["outcome"] == "failed"]
    assert (crash["check"], crash["variant"]) == ("eager", "#0 empty cpu")
    assert crash["detail"].startswith("crashed the process: SIGSEGV on #0 empty cpu")
    assert_the_checks_went_on_after(rows, crash)
    assert report.operator == "oc_test::crash_on_empty" and not report.passed


MAIN_MODULE = """
import torch

@torch.library.custom_op("oc_main::double", mutates_args=())
def double(x: torch.Tensor) -> torch.Tensor:
    return 2 * x
"""


@pytest.fixture(scope="module")
def operator_of_main():
    """A custom_op defined as a script defines it: in ``__main__``."""
    namespace = {"__name__": "__main__"}
    exec(compile(MAIN_MODULE, "script.py", "exec"), namespace)
    return namespace["double"]


def test_isolating_an_operator_of_main_says_how_to_name_it(operator_of_main):
    with pytest.raises(JobError, match=r"which cannot import __main__: define it in"):
        check_operator(operator_of_main, [(torch.ones(2),)], isolate=True)


def test_an_operator_of_main_is_found_by_name_with_the_file_that_defines_it(
    operator_of_main,
):
    target = target_of(operator_of_main, imports=["script.py"])
    assert target == ("oc_main::double.default", None)


KEPT_OPERATOR = """
import torch

@torch.library.custom_op("oc_kept::add_one", mutates_args=())
def add_one(x: torch.Tensor) -> torch.Tensor:
    return x + 1

@add_one.register_fake
def _(x):
    return torch.empty_like(x{fake_shape})
"""


def test_the_child_is_kept_for_the_next_call_until_its_imports_change(tmp_path):
    module = tmp_path / "kept_operator.py"
    module.write_text(KEPT_OPERATOR.format(fake_shape=""))

    def check():
        report = check_operator(
            "oc_kept::add_one",
            [(torch.randn(3, 4),)],
            imports=[str(module)],
            isolate=True,
            only=["test_faketensor"],
            devices=["cpu"],
            dtypes=[torch.float32],
        )
        return report, isolation._warm.process.pid

    first, child = check()
    second, same_child = check()
    assert first.passed and second.passed
    assert same_child == child
    # The fake kernel goes wrong on disk: the kept child has the old one
    # imported, so a fresh child must check the file as it is now.
    module.write_text(KEPT_OPERATOR.format(fake_shape="[0]"))
    stat = module.stat()
    os.utime(module, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    third, other_child = check()
    assert other_child != child
    assert {row.check for row in third.failed} == {"test_faketensor"}
