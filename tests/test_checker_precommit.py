"""The checker's pre-commit hook and its pyproject.toml configuration, as the
package's README gives them, run by pre-commit itself.

A scratch git repository holds an operator module, a samples file, a
``pyproject.toml`` with ``[tool.operator_checker]`` and the README's
``.pre-commit-config.yaml``, copied from the README, so that what a user
copies is what runs. pre-commit, from its own fresh environment (uv links it
from the cache), runs the hook with the site's Python on ``PATH``, as it
would in a project's environment where torch and the checker are
installed: the hook passes on a correct operator and fails the commit,
saying why, once its fake kernel goes wrong.
"""

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.helpers import REPO, fresh_python, run

PRE_COMMIT = "pre-commit==4.7.0"
README = REPO / "operator_checker" / "README.md"

OPERATORS = """
import torch


@torch.library.custom_op("precommit::double", mutates_args=())
def double(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@double.register_fake
def _(x):
    return torch.empty_like(x{wrong})
"""

PYPROJECT = """
[project]
name = "scratch"

[tool.operator_checker]
targets = ["precommit::double"]
imports = ["ops.py"]
samples = "samples.pt"
devices = ["cpu"]
"""


def readme_block(language, containing):
    """The README's code block in ``language`` that contains ``containing``."""
    blocks = re.findall(rf"```{language}\n(.*?)```", README.read_text(), re.S)
    (found,) = [block for block in blocks if containing in block]
    return found


@pytest.fixture(scope="module")
def pre_commit(uv, tmp_path_factory):
    venv = tmp_path_factory.mktemp("pre-commit") / "venv"
    fresh_python(uv, venv, [PRE_COMMIT])
    return venv / "bin" / "pre-commit"


def test_the_readmes_pre_commit_hook_passes_then_stops_a_broken_commit(
    pre_commit, tmp_path
):
    import torch

    from operator_checker import save_samples

    (tmp_path / "ops.py").write_text(textwrap.dedent(OPERATORS.format(wrong="")))
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    save_samples(tmp_path / "samples.pt", {"precommit::double": [(torch.ones(2, 3),)]})
    config = readme_block("yaml", "repo: local")
    (tmp_path / ".pre-commit-config.yaml").write_text(config)
    for command in (["init", "-q"], ["add", "."]):
        subprocess.run(["git", *command], cwd=tmp_path, check=True)
    env = {
        # The project's environment first (its python runs the hook), then git.
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "PYTHONPATH": str(REPO / "operator_checker" / "src"),  # the checkout's
        "HOME": str(tmp_path),  # pre-commit's cache of hook environments
        "PRE_COMMIT_HOME": str(tmp_path / ".cache"),
    }
    hook = [str(pre_commit), "run", "--all-files", "--color", "never"]
    passed = run(hook, cwd=tmp_path, env=env, timeout=900)
    assert passed.returncode == 0, passed.stdout[-3000:] + passed.stderr[-3000:]
    assert "operator-checker --quick" in passed.stdout
    assert "Passed" in passed.stdout
    # The fake kernel goes wrong: the hook fails, and says which check.
    (tmp_path / "ops.py").write_text(textwrap.dedent(OPERATORS.format(wrong="[0]")))
    subprocess.run(["git", "add", "ops.py"], cwd=tmp_path, check=True)
    failed = run(hook, cwd=tmp_path, env=env, timeout=900)
    assert failed.returncode == 1, failed.stdout[-3000:]
    assert "Failed" in failed.stdout
    assert "test_faketensor: failed" in failed.stdout


def test_the_readmes_pyproject_table_is_one_the_checker_reads(tmp_path):
    from operator_checker.config import load

    path = tmp_path / "pyproject.toml"
    path.write_text(readme_block("toml", "[tool.operator_checker]"))
    config = load(path)
    assert config.options["targets"] == ["mylib::crop", "mylib::pad"]
    assert config.for_operator("mylib::crop")["nondifferentiable"] == {
        "boxes": "holds image indices"
    }
    assert config.for_operator("mylib::pad") == {}
