"""Isolation: a crash or a hang of the operator is a failed row naming the
signal and the variant, and the other checks go on in a fresh child process.

Each child imports torch (seconds): every run here checks two cheap checks
on one small sample."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
import torch
from operator_checker.api import target_of
from operator_checker.isolation import JobError

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
# on first use take seconds on a loaded machine), short against the hang; a
# slow machine raises it, a fast one lowers it.
HANG_TIMEOUT = int(os.environ.get("OPERATOR_CHECKER_TEST_HANG_TIMEOUT", "30"))


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


def test_the_child_imports_what_the_parent_can_and_no_folder_twice(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("PYTHONPATH", "/already/there")
    stdlib = os.path.dirname(os.__file__)
    env = isolation.child_environment([str(tmp_path), "/no/such/folder", stdlib])
    folders = env["PYTHONPATH"].split(os.pathsep)
    # This package's source folder (the tests import the source), the test's
    # folder, then what was there: never a folder the child finds anyway.
    assert folders[-2:] == [str(tmp_path), "/already/there"]
    assert stdlib not in folders and "/no/such/folder" not in folders
    assert env["PYTHONFAULTHANDLER"] == "1"


# -- What a crash row says ------------------------------------------------------


def command(*arguments):
    return [sys.executable, "-m", "operator_checker", *map(str, arguments)]


@pytest.mark.slow
def test_a_crash_row_quotes_the_crashing_step_alone_and_names_the_kernel_line(
    samples_file, operators_file, tmp_path
):
    report = tmp_path / "report.json"
    done = subprocess.run(
        command("oc_test::chatty_crash_on_empty", "--import", operators_file)
        + ["--samples", str(samples_file), "--only", "test_faketensor"]
        + ["--device", "cpu", "--dtype", "float32", "--json", str(report)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    (crash,) = [
        r for r in json.loads(report.read_text())["rows"] if r["outcome"] == "failed"
    ]
    # The earlier steps printed "chatty kernel: ..."; the crashing step did
    # not, and Python's fault handler names the line of the kernel.
    assert "chatty kernel" not in crash["detail"], crash
    assert crash["detail"].startswith(
        "crashed the process: SIGSEGV on #0 empty cpu, in checker_operators.py:"
    ), crash
    assert crash["detail"].split(", in checker_operators.py:")[1].split()[1:3] == [
        "in",
        "chatty_crash_on_empty",
    ]
    # A crash on the sample as given or on an empty input is no layout problem.
    assert crash["fix"] == ""


FAULT_REPORT = """\
some output of the step
Fatal Python error: Segmentation fault

Current thread 0x00007f46ff5cdb80 (most recent call first):
  File "{stdlib}/ctypes/__init__.py", line 519 in string_at
  File "{where}", line 80 in identical
  File "{package}/core.py", line 300 in run_variant
"""


def test_a_crash_in_the_checkers_own_code_is_named_as_the_checkers():
    stdlib = os.path.dirname(os.__file__)
    package = str(isolation.PACKAGE)
    text = FAULT_REPORT.format(
        stdlib=stdlib, where=f"{package}/variants.py", package=package
    )
    assert isolation.where_it_crashed(text) == (
        "checker",
        "variants.py:80 in identical",
    )
    row = isolation.crash_row("eager", "#0 as given", "SIGSEGV", text)
    assert row.outcome == "not applicable"
    assert row.detail.startswith(
        "the checker's own code crashed the process (SIGSEGV, variants.py:80 in "
        "identical) on #0 as given, outside any call of the operator"
    )
    assert "(last output: some output of the step)" in row.detail
    users = FAULT_REPORT.format(stdlib=stdlib, where="/home/me/ops.py", package=package)
    assert isolation.where_it_crashed(users) == ("operator", "ops.py:80 in identical")
    assert isolation.crash_row("eager", "#0 as given", "SIGSEGV", users).outcome == (
        "failed"
    )


@pytest.mark.slow
def test_after_too_many_crashes_the_report_keeps_the_operator_and_its_variants(
    operators_file, monkeypatch
):
    monkeypatch.setattr(isolation, "MAX_CRASHES", 2)
    report = check_operator(
        "torch.ops.oc_test.crash_unless_contiguous",
        [(torch.randn(3, 4), 2.0)],
        imports=[operators_file],
        isolate=True,
        only=["test_faketensor"],
        devices=["cpu"],
        dtypes=[torch.float32],
    )
    assert report.operator == "oc_test::crash_unless_contiguous"
    assert report.variants > 0 and sum(report.seconds.values()) > 0
    crashed = [row for row in report.failed if "crashed the process" in row.detail]
    assert len(crashed) == 2
    assert [row.detail for row in report.failed if row.variant == "all"] == [
        "2 crashes: the remaining checks were not run"
    ]


@pytest.mark.slow
def test_a_crash_on_the_operators_own_sample_ends_its_check_at_once(operators_file):
    start = time.monotonic()
    report = check_operator(
        "oc_test::crash_always",
        [(torch.randn(3, 4), 2.0)],
        imports=[operators_file],
        isolate=True,
        devices=["cpu"],
    )
    failed = [(row.check, row.variant) for row in report.failed]
    assert failed == [("eager", "#0 as given"), ("eager", "all")], report.failed
    assert report.failed[1].detail == (
        "crashed on its own sample: the remaining checks were not run"
    )
    # One crash and no fresh child per variant (each costs seconds).
    assert time.monotonic() - start < 60


# -- The child's reach: timeout, samples, Ctrl-C --------------------------------


@pytest.mark.slow
def test_a_hang_while_importing_is_cut_by_the_timeout_and_exits_2(
    samples_file, tmp_path
):
    hangs = tmp_path / "hangs_at_import.py"
    hangs.write_text("import time\ntime.sleep(600)\n")
    done = subprocess.run(
        command("oc_test::scale", "--import", hangs, "--samples", samples_file)
        + ["--timeout", "5", "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.splitlines()
    assert line == (
        "operator_checker: error: oc_test::scale: the child process hung: no "
        "result within 5 s (timeout) while importing or preparing oc_test::scale"
    )


SAMPLES_WITH_PID = """
import os
import torch


def samples():
    with open(os.environ["SAMPLES_PID_FILE"], "w") as file:
        file.write(str(os.getpid()))
    return {"oc_test::wrong_fake": [(torch.ones(2, 3), 2.0)]}
"""


@pytest.mark.slow
def test_a_samples_function_runs_in_the_child_and_another_operators_are_refused(
    operators_file, tmp_path
):
    functions = tmp_path / "made_samples.py"
    functions.write_text(SAMPLES_WITH_PID)
    pid_file = tmp_path / "pid"
    done = subprocess.run(
        command("oc_test::scale", "--import", operators_file)
        + ["--samples", f"{functions}:samples", "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "SAMPLES_PID_FILE": str(pid_file)},
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "holds no samples for oc_test::scale; it holds oc_test::wrong_fake" in (
        done.stderr
    )
    # The function ran, in a process other than the command's own.
    assert pid_file.read_text() and "samples()" not in done.stderr
    command_pids = {os.getpid(), int(pid_file.read_text())}
    assert len(command_pids) == 2


@pytest.mark.slow
def test_ctrl_c_keeps_what_finished_and_exits_130_without_a_traceback(
    samples_file, operators_file, tmp_path
):
    report = tmp_path / "report.json"
    process = subprocess.Popen(
        command("oc_test::scale", "oc_test::hang_on_empty")
        + ["--import", operators_file, "--samples", samples_file]
        + ["--only", "test_faketensor", "--device", "cpu", "--dtype", "float32"]
        + ["--json", report, "-v"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # Wait until the hang has started: the progress line of its empty variant.
    for line in process.stderr:
        if "oc_test::hang_on_empty: eager on #0 empty cpu" in line:
            break
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 130, out + err
    assert "Traceback" not in out + err
    assert err.splitlines()[-1] == (
        "operator_checker: error: interrupted: the reports hold what finished"
    )
    written = json.loads(report.read_text())
    assert written["interrupted"] is True
    operators = {op["operator"]: op for op in written["operators"]}
    assert operators["oc_test::scale"]["interrupted"] is False
    assert operators["oc_test::scale"]["passed"] is True
    assert operators["oc_test::hang_on_empty"]["interrupted"] is True
    assert re.search(r"^oc_test::scale: \d+ variants, passed", out, re.M)


# -- One child for a pytest session ---------------------------------------------


def test_the_reuse_key_ignores_what_pytest_changes_per_test(monkeypatch):
    job = isolation.Job("oc_test::scale", "samples.pt", imports=["checker_operators"])
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "test_a.py::test_one (setup)")
    monkeypatch.setenv("COLUMNS", "80")
    first = isolation.reuse_key(job)
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "test_a.py::test_two (call)")
    monkeypatch.setenv("COLUMNS", "120")
    assert isolation.reuse_key(job) == first
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/elsewhere")
    assert isolation.reuse_key(job) != first


def test_steps_are_keyed_by_structure_and_survive_json():
    from operator_checker.steps import Steps

    key = ("variant", 0, "strided", "float32", "cpu", False)
    done = json.loads(json.dumps([["test_faketensor", key]]))  # lists, not tuples
    steps = Steps(done=done)
    assert not steps.wanted("test_faketensor", key)
    assert steps.wanted(
        "test_faketensor", ("variant", 0, "offset", "float32", "cpu", False)
    )
    assert steps.wanted("gradients", ("declared", "nondifferentiable", "x"))
    assert steps.wanted("gradients", ("declared", "nondifferentiable", "y"))
