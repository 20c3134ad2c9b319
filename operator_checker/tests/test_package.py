"""The package's metadata agrees with its code."""

import tomllib
from pathlib import Path

import operator_checker

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


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


def test_the_version_is_the_one_the_package_declares():
    assert operator_checker.__version__ == project()["version"]


def test_every_public_name_is_found():
    for name in operator_checker.__all__:
        assert getattr(operator_checker, name) is not None, name
