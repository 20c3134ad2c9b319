"""The package's metadata agrees with its code."""

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import operator_checker

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


TORCH_FLOOR_TEXT = [str(part) for part in operator_checker.TORCH_FLOOR]


def project():
    return tomllib.loads(PYPROJECT.read_text())["project"]


def test_the_torch_floor_is_the_one_the_package_requires():
    (torch_requirement,) = [
        requirement
        for requirement in project()["dependencies"]
        if requirement.replace(" ", "").startswith("torch>=")
    ]
    floor = torch_requirement.replace(" ", "").removeprefix("torch>=")
    assert tuple(int(part) for part in floor.split(".")) == operator_checker.TORCH_FLOOR


def test_the_version_has_one_place_and_the_changelog_names_it():
    pyproject = tomllib.loads(PYPROJECT.read_text())
    assert "version" not in pyproject["project"]
    assert pyproject["project"]["dynamic"] == ["version"]
    dynamic = pyproject["tool"]["setuptools"]["dynamic"]["version"]
    assert dynamic == {"attr": "operator_checker.__version__"}
    changelog = (PYPROJECT.parent / "CHANGELOG.md").read_text()
    headings = [line for line in changelog.splitlines() if line.startswith("## ")]
    assert headings[0].startswith(f"## {operator_checker.__version__} ")
    major, minor, patch = map(int, operator_checker.__version__.split("."))
    assert (major, minor, patch) >= (1, 1, 0)


def test_every_public_name_is_found():
    for name in operator_checker.__all__:
        assert getattr(operator_checker, name) is not None, name


@pytest.mark.slow
def test_a_torch_below_the_floor_is_refused_in_one_line():
    # The running torch posing as the release below the floor: what the
    # package checks is the version it reports.
    below = f"{TORCH_FLOOR_TEXT[0]}.{int(TORCH_FLOOR_TEXT[1]) - 1}.0"
    code = (
        "import torch\n"
        f"torch.__version__ = {below!r}\n"
        "import operator_checker\n"
        "try:\n"
        "    operator_checker.check_operator\n"
        "except ImportError as error:\n"
        "    print(error)\n"
        "else:\n"
        "    print('imported')\n"
    )
    process = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert process.stdout.strip() == (
        f"operator_checker needs PyTorch {'.'.join(TORCH_FLOOR_TEXT)} or later; "
        f"this is {below}"
    ), process.stdout + process.stderr


def test_the_command_names_the_dtypes_the_checker_converts_to():
    from operator_checker.cli import DTYPE_NAMES
    from operator_checker.variants import DTYPES

    assert DTYPE_NAMES == tuple(str(d).removeprefix("torch.") for d in DTYPES)


def test_the_tests_import_the_copy_they_test():
    """The source, or under OPERATOR_CHECKER_TEST_INSTALLED=1 the installed
    copy (a release's test of its own wheel and sdist); and so do the
    commands the tests run."""
    from conftest import INSTALLED, SOURCE

    child = subprocess.run(
        [
            sys.executable,
            "-c",
            "import operator_checker; print(operator_checker.__file__)",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    for imported in (operator_checker.__file__, child.stdout.strip()):
        folder = Path(imported).resolve().parent
        if INSTALLED:
            assert folder != SOURCE / "operator_checker" and "site-packages" in str(
                folder
            ), folder
        else:
            assert folder == SOURCE / "operator_checker", folder
