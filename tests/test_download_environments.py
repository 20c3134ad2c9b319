"""The wheel-building pages run in the environments readers download them into.

A reader who downloads ``cpp_extension_packaging`` or ``cpp_stable_abi`` runs
it in an environment of their own, and two kinds once stopped both pages:

* one made by ``uv venv``, which has no pip, holding only the packages the
  notebook's first cell names (``_ext/notebooks.packages_for``): the pages
  ran ``python -m pip`` ("No module named pip");
* a plain ``python -m venv``, which on Python 3.11 still seeds setuptools
  65.5, with the page's packages installed on top: setuptools 65.5 cannot
  build a wheel without the ``wheel`` package ("invalid command
  'bdist_wheel'").

The pip-less environment gets the pinned torch; each page's plain one the
page's floor release (torch 2.15 itself requires a recent setuptools, which
would hide the problem), and the run there is also the page's run on its
floor (``test_versions`` checks the other pages' floors through their
notebooks). Each is made with uv from uv's cache (the
site's pins as constraints, so nothing is downloaded and torch's files are
linked, not copied), and each page runs in it from an empty folder with an
empty extensions cache, so that it really builds its wheels (compiling
through ccache where it is installed: ``helpers.through_ccache``), with a
temporary folder of its own, in which it must leave nothing (as ``make
matrix`` checks on every release). A plain venv whose setuptools is too old
must stop the page in one line.

Cost: the environments take seconds (uv links their files from its cache).
The page runs take the time: each shipping page in the uv venv and in its
plain venv, and the first once more before its setuptools is upgraded when
the seeded one is too old (so five runs on Python 3.11), each compiling C++
(no CUDA: the first cells name no toolkit) in a few fresh interpreters.
`make test` lists their times (``--durations``).
"""

import os
import re
import sys
from pathlib import Path

import envs
import matrix
import notebooks
import pytest
from packaging.version import Version

from tests.support.helpers import REPO, WHEEL_PAGES, floor_release, run, through_ccache

PAGES = WHEEL_PAGES
# The module's environments are made once, by the one worker that runs all
# of its tests.
pytestmark = pytest.mark.xdist_group("download-environments")
# Left out of the constraints: a plain venv keeps the setuptools and pip it
# was made with unless the page's packages ask for newer ones.
SEEDED = {"setuptools", "pip", "wheel"}
# Pinned by the release the plain venv gets, not by the site.
TORCH_STACK = ("torch", "torchvision", "triton", "nvidia-", "cuda-")


def first_cell_packages(page):
    """The requirements the page's notebook names in its first cell."""
    source = (REPO / "advanced" / f"{page}.py").read_text()
    return [spec.strip("\"'") for spec in notebooks.packages_for(source)]


def project_name(spec):
    return re.split(r"[=<>!~\[; ]", spec, maxsplit=1)[0].lower()


def site_pins(tmp_path_factory, *, with_torch):
    """The site's pins, less the packages a plain venv is seeded with."""
    lines = (REPO / "constraints.txt").read_text().splitlines()
    kept = [
        line
        for line in lines
        if line.strip()
        and not line.startswith("#")
        and project_name(line) not in SEEDED
        and (with_torch or not project_name(line).startswith(TORCH_STACK))
    ]
    path = tmp_path_factory.mktemp("constraints") / "constraints.txt"
    path.write_text("\n".join(kept) + "\n")
    return path


@pytest.fixture(scope="module")
def constraints(tmp_path_factory):
    return site_pins(tmp_path_factory, with_torch=True)


def install(uv, python, specs, constraints):
    # Without compiling every package's bytecode, as a reader's install does
    # (uv's default): the page's first interpreter writes the bytecode of what
    # it imports (helpers.run lets it), and the page's later ones read it.
    command = [str(uv), "pip", "install", "--quiet"]
    command += ["--python", str(python)]
    process = run(command + ["-c", str(constraints), *specs], timeout=900)
    assert process.returncode == 0, process.stderr[-3000:]


def activated(venv):
    """Environment variables of a shell with ``venv`` activated, and no other."""
    own = Path(sys.prefix).resolve()
    path = [
        entry
        for entry in os.environ.get("PATH", "").split(os.pathsep)
        if entry and not Path(entry).resolve().is_relative_to(own)
    ]
    return {
        "VIRTUAL_ENV": str(venv),
        "PATH": os.pathsep.join([str(venv / "bin"), *path]),
    }


def run_page(venv, page, folder, base):
    """Run ``page`` in ``venv`` from the empty ``folder``, its temporary
    folders in there too; its compiles go through ccache keyed by paths
    relative to ``base`` (the worker's temporary folder, which holds the
    environment and ``folder``), so that the same build in a later run of the
    suite reuses its object files: the page still builds each wheel."""
    (folder / "tmp").mkdir(parents=True)
    env = activated(venv)
    env |= {"TORCH_EXTENSIONS_DIR": str(folder / "extensions")}
    env |= {"TMPDIR": str(folder / "tmp")}
    env |= through_ccache(base, env["PATH"])
    script = REPO / "advanced" / f"{page}.py"
    return run([str(venv / "bin" / "python"), str(script)], cwd=folder, env=env)


def assert_nothing_left(folder):
    """The page's run left nothing in its temporary folder but what PyTorch
    leaves whatever a page does (as ``make matrix`` checks on every release)."""
    left = matrix.left_in_tmpdir(folder / "tmp")
    assert not left, f"the page left files in its TMPDIR: {'; '.join(left)}"


def all_first_cell_packages():
    specs = []
    for page in PAGES:
        specs += [s for s in first_cell_packages(page) if s not in specs]
    return specs


@pytest.fixture(scope="module")
def uv_venv(uv, constraints, tmp_path_factory):
    """``uv venv`` (no pip) with exactly the first cells' packages."""
    venv = tmp_path_factory.mktemp("uv-venv") / "env"
    made = run([str(uv), "venv", "--quiet", "--python", envs.base_python(), str(venv)])
    assert made.returncode == 0, made.stderr
    install(uv, venv / "bin" / "python", all_first_cell_packages(), constraints)
    return venv


@pytest.fixture(scope="module")
def plain_venvs(uv, tmp_path_factory):
    """For each page, ``python -m venv`` with its own seed, then the first
    cell's packages, with the page's floor release of torch, as a reader on
    the floor has it (torch 2.15 itself requires a recent setuptools; the
    floors do not, on Python 3.11). Before the packages arrive, the first page
    runs once with whatever setuptools the venv was seeded with (65.5 on
    Python 3.11, none on 3.12 and later).

    ``{page: venv}``, the seeded setuptools version, and that first run.
    """
    constraints = site_pins(tmp_path_factory, with_torch=False)
    base = tmp_path_factory.getbasetemp()
    venvs, seeded, before = {}, None, None
    for page in PAGES:
        folder = tmp_path_factory.mktemp(f"plain-venv-{page}")
        venv = folder / "env"
        made = run([envs.base_python(), "-m", "venv", str(venv)])
        assert made.returncode == 0, made.stderr
        python = venv / "bin" / "python"
        torch = f"torch=={floor_release(page)}"
        specs = [
            torch if project_name(s) == "torch" else s
            for s in first_cell_packages(page)
        ]
        if page == PAGES[0]:
            without_setuptools = [s for s in specs if project_name(s) != "setuptools"]
            install(uv, python, without_setuptools, constraints)
            version = "import setuptools; print(setuptools.__version__)"
            seeded = run([str(python), "-c", version]).stdout.strip() or None
            if seeded is None or Version(seeded) < Version("70.1"):
                before = run_page(venv, page, folder / "before", base)
        install(uv, python, specs, constraints)
        venvs[page] = venv
    return venvs, seeded, before


def test_the_first_cells_name_the_build_tools_with_their_minimum_versions():
    for page in PAGES:
        named = {project_name(s): s for s in first_cell_packages(page)}
        for tool in ("setuptools", "build", "installer", "packaging"):
            assert tool in named, f"{page}: the first cell does not name {tool}"
        assert re.search(r">=\s*70\.1", named["setuptools"]), (page, named)


def test_a_uv_venv_has_no_pip(uv_venv):
    process = run([str(uv_venv / "bin" / "python"), "-c", "import pip"])
    assert process.returncode != 0
    assert "No module named 'pip'" in process.stderr


@pytest.mark.parametrize("page", PAGES)
def test_wheel_page_runs_in_a_uv_venv_without_pip(
    uv_venv, page, tmp_path, tmp_path_factory
):
    base = tmp_path_factory.getbasetemp()
    process = run_page(uv_venv, page, tmp_path / "run", base)
    assert process.returncode == 0, process.stdout[-2000:] + process.stderr[-4000:]
    assert "built the wheel in" in process.stdout
    assert_nothing_left(tmp_path / "run")
    if page == "cpp_extension_packaging":
        # No CUDA toolkit among the first cell's packages: one line says so.
        assert re.search(r"^CUDA kernel: skipped the build, ", process.stdout, re.M)


def test_a_too_old_setuptools_stops_the_page_in_one_line(plain_venvs):
    _, seeded, before = plain_venvs
    if before is None:
        pytest.skip(f"this Python seeds setuptools {seeded}, new enough already")
    assert before.returncode == 1, before.stderr[-3000:]
    assert "Traceback" not in before.stderr
    (line,) = before.stderr.strip().splitlines()[-1:]
    assert re.fullmatch(r"This page needs setuptools>=70\.1\b.*", line), line


@pytest.mark.parametrize("page", PAGES)
def test_wheel_page_runs_on_its_floor_in_a_plain_venv_with_the_first_cell_installed(
    plain_venvs, page, tmp_path, tmp_path_factory
):
    venvs, _, _ = plain_venvs
    release = floor_release(page)
    assert release, f"{page} has no measured floor"
    base = tmp_path_factory.getbasetemp()
    process = run_page(venvs[page], page, tmp_path / "run", base)
    assert process.returncode == 0, (
        f"python advanced/{page}.py on PyTorch {release} exited with "
        f"{process.returncode}:\n{process.stdout[-2000:]}{process.stderr[-4000:]}"
    )
    assert "built the wheel in" in process.stdout
    assert_nothing_left(tmp_path / "run")
    version = "import torch; print(torch.__version__)"
    installed = run([str(venvs[page] / "bin" / "python"), "-c", version]).stdout
    assert installed.split("+")[0].strip() == release, installed
