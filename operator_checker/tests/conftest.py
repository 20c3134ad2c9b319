"""Fixtures of the package's tests: the test operators, imported once (an
operator registers once per process), and a file of their samples."""

import os
from pathlib import Path

import checker_operators
import pytest
import torch

from operator_checker import save_samples

SOURCE = Path(__file__).resolve().parents[1] / "src"
# The tests test the source (pyproject.toml's pythonpath), and the commands
# they run (python -m operator_checker) import it too. A release tests the
# copy it installed instead: OPERATOR_CHECKER_TEST_INSTALLED=1, with pytest's
# pythonpath emptied (-o pythonpath=).
INSTALLED = os.environ.get("OPERATOR_CHECKER_TEST_INSTALLED") == "1"
if not INSTALLED:
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(SOURCE), os.environ.get("PYTHONPATH")])
    )


def pytest_configure(config):
    # Here rather than in a pyproject.toml: the site's session and the
    # package's own both load this file.
    config.addinivalue_line(
        "markers",
        "slow: starts child processes that import torch, or waits out a hang "
        "(make unit leaves these out; make test runs them)",
    )


# The samples file's operators, each with one small sample.
SAMPLED = (
    "scale",
    "wrong_fake",
    "wrong_backward",
    "no_backward",
    "crash_on_empty",
    "hang_on_empty",
    "chatty_crash_on_empty",
    "crash_unless_contiguous",
)


@pytest.fixture(scope="session")
def samples_file(tmp_path_factory):
    """A file written by save_samples: one sample for each test operator."""
    path = tmp_path_factory.mktemp("samples") / "samples.pt"
    generator = torch.Generator().manual_seed(0)
    save_samples(
        path,
        {
            getattr(checker_operators, name): [
                (torch.randn(3, 4, generator=generator), 2.0)
            ]
            for name in SAMPLED
        },
    )
    return path


@pytest.fixture(scope="session")
def operators_file():
    """The file that registers the test operators, for a child process."""
    return checker_operators.OPERATORS_FILE


@pytest.fixture
def valid_report():
    """A check that a JSON report follows the schema the package ships."""
    import jsonschema
    from operator_checker.report import json_schema

    schema = json_schema()

    def check(written):
        jsonschema.validate(written, schema)
        return written

    return check
