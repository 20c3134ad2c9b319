"""Setting up never gets stuck: bad interpreters, broken installs, missing tools.

``make`` creates the site's virtual environment with ``tools/envs.py``. These
tests fail a setup on purpose, the ways a new user's machine fails it, then
check that the message is one clear line and that the next, normal run
succeeds.

One test installs the whole site environment after a failed start (torch,
Sphinx, with bytecode). The broken installs (interrupted, killed midway, made
by another Python) go through the same code, ``envs.ensure``, by the other
environment ``make`` keeps: ``make lint-venv``, here with a requirements file
that holds numpy alone (linked from uv's cache in about a second), since
installing torch three more times would only repeat the first test's work.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import envs
import pytest

from tests.support.helpers import REPO, run


def runs(python):
    return subprocess.run([python, "-c", ""], capture_output=True).returncode == 0


# Interpreters this machine has that the site does not support.
UNSUPPORTED = [
    str(python)
    for minor in (10, 9, 8)
    for python in [
        shutil.which(f"python3.{minor}"),
        *sorted(Path.home().glob(f".pyenv/versions/3.{minor}.*/bin/python3.{minor}")),
    ]
    if python and runs(python)
]


def make_venv(venv, *variables, env=None):
    return run(["make", "venv", f"VENV={venv}", *variables], env=env, timeout=900)


def small_requirements(folder):
    """A requirements file in ``folder`` holding the site's numpy pin alone."""
    (pin,) = [
        line.strip()
        for line in (REPO / "constraints.txt").read_text().splitlines()
        if line.startswith("numpy==")
    ]
    requirements = Path(folder) / "small-requirements.txt"
    requirements.write_text(pin + "\n")
    return requirements


def small_venv_command(venv):
    """``make lint-venv`` into ``venv``, with ``small_requirements`` beside it."""
    requirements = small_requirements(Path(venv).parent)
    return [
        "make",
        "lint-venv",
        f"LINT_VENV={venv}",
        f"LINT_REQUIREMENTS={requirements}",
    ]


def make_small_venv(venv):
    return run(small_venv_command(venv), timeout=900)


def error_lines(process):
    return [line for line in process.stderr.splitlines() if line.startswith("error:")]


def has_bytecode(venv, module):
    """Whether ``module`` was installed into ``venv`` with its bytecode."""
    check = (
        "import importlib.util, os, sys; "
        f"spec = importlib.util.find_spec({module!r}); "
        "sys.exit(0 if os.path.exists(importlib.util.cache_from_source(spec.origin)) "
        "else 1)"
    )
    return run([str(Path(venv) / "bin" / "python"), "-c", check]).returncode == 0


def test_unsupported_python_stops_in_one_line_and_leaves_nothing(tmp_path):
    assert UNSUPPORTED, "no unsupported Python (3.8-3.10) on this machine to try"
    venv = tmp_path / "venv"
    failed = make_venv(venv, f"PYTHON={UNSUPPORTED[0]}")
    assert failed.returncode != 0
    (line,) = error_lines(failed)
    version = subprocess.run(
        [UNSUPPORTED[0], "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert f"is Python {version};" in line
    assert "3.11, 3.12, 3.13" in line and "PYTHON=" in line
    assert not venv.exists(), "a failed setup left an environment behind"
    # The next, normal run builds a working environment, with its packages'
    # bytecode (checked before anything imports torch, which could write it
    # where writing bytecode is allowed).
    good = make_venv(venv)
    assert good.returncode == 0, good.stderr[-3000:]
    assert has_bytecode(venv, "torch"), "torch was installed without its bytecode"
    check = run([str(venv / "bin" / "python"), "-c", "import torch, sphinx"])
    assert check.returncode == 0, check.stderr[-2000:]


def test_an_interrupted_install_is_built_again(tmp_path):
    venv = tmp_path / "venv"
    # What an install killed midway leaves: an environment with a few packages
    # and no stamp saying it finished.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    assert not (venv / envs.STAMP).exists()
    process = make_small_venv(venv)
    assert process.returncode == 0, process.stderr[-3000:]
    assert "incomplete or was made otherwise; building it again" in process.stdout
    stamp = json.loads((venv / envs.STAMP).read_text())
    assert stamp["python_version"] == envs.python_version_text()
    assert has_bytecode(venv, "numpy"), "numpy was installed without its bytecode"
    check = run([str(venv / "bin" / "python"), "-c", "import numpy"])
    assert check.returncode == 0, check.stderr[-2000:]


def test_an_install_killed_midway_is_not_trusted(tmp_path):
    venv = tmp_path / "venv"
    process = subprocess.Popen(
        small_venv_command(venv),
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    # Kill it as soon as the environment exists and packages go in.
    deadline = time.monotonic() + 300
    while not (venv / "bin" / "python").exists() and time.monotonic() < deadline:
        time.sleep(0.005)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    assert venv.exists()
    if (venv / envs.STAMP).exists():
        pytest.fail("the install finished before it could be killed; cannot test")
    again = make_small_venv(venv)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "building it again" in again.stdout


def test_environment_of_another_python_is_not_reused(tmp_path):
    venv = tmp_path / "venv"
    venv.mkdir()
    (venv / "bin").mkdir()
    (venv / "bin" / "python").symlink_to(shutil.which("python3.12") or sys.executable)
    # A finished environment of these requirements, but made by another
    # interpreter.
    stamp = envs.stamp_for(small_requirements(tmp_path).read_text())
    stamp |= {"python": "/somewhere/else/python3.12", "python_version": "3.12"}
    (venv / envs.STAMP).write_text(json.dumps(stamp))
    process = make_small_venv(venv)
    assert process.returncode == 0, process.stderr[-3000:]
    assert "building it again" in process.stdout
    stamp = json.loads((venv / envs.STAMP).read_text())
    assert envs.same_python(stamp["python"], envs.base_python())


def test_too_little_disk_is_named_before_installing(tmp_path):
    venv = tmp_path / "venv"
    process = make_venv(venv, env={"PYTORCH_SITE_NEEDED_GIB": "1000000"})
    assert process.returncode != 0
    (line,) = error_lines(process)
    assert "GiB free" in line and "needs about 1000000 GiB" in line
    assert not venv.exists()


def test_unreachable_registry_is_named(tmp_path):
    venv = tmp_path / "venv"
    closed = "http://127.0.0.1:9/simple/"
    process = make_venv(
        venv, env={"UV_INDEX_URL": closed, "PIP_INDEX_URL": closed, "UV_OFFLINE": ""}
    )
    assert process.returncode != 0
    (line,) = error_lines(process)
    assert f"could not reach the package registry at {closed}" in line
    assert not venv.exists()


def test_pip_installs_when_uv_cannot_be_had(tmp_path):
    # A uv release that does not exist cannot be installed: pip takes over,
    # and says so. (A small requirement keeps this quick.)
    venv = str(tmp_path / "venv")
    script = (
        "import sys; sys.path.insert(0, 'tools'); import envs; "
        f"envs.ensure({venv!r}, 'six==1.16.0', ['six==1.16.0'], 'six')"
    )
    process = run(
        [sys.executable, "-c", script],
        env={
            "PYTORCH_SITE_UV_VERSION": "0.0.0",
            "XDG_CACHE_HOME": str(tmp_path / "cache"),
        },
        timeout=600,
    )
    assert process.returncode == 0, process.stderr[-3000:]
    assert "uv 0.0.0 could not be installed" in process.stdout
    assert "using pip instead" in process.stdout
    assert "six ready in" in process.stdout and "(pip)" in process.stdout
    stamp = json.loads((tmp_path / "venv" / envs.STAMP).read_text())
    assert stamp["installer"] == "pip"
    assert has_bytecode(venv, "six"), "pip installed six without its bytecode"
