"""What the slow tests share: the repository's facts, running commands and
make, scratch copies of the project, and reading a built page.

A plain module (fixtures and hooks are in conftest.py). It imports nothing
heavy at import time: nbformat only when a notebook is read.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import envs
import pytest

from pagelib import course, layout
from pagelib import records as version_records
from tests.support.pages import (  # noqa: F401 - example_source: the slow tests take it here
    REPO,
    example_source,
    matrix_toml,
    pinned_torch,
    write_page_records,
)

EXAMPLES = sorted(p.stem for p in (REPO / "advanced").glob("*.py"))
# Variables that would make a build or a test run do less than it should.
NARROWING_VARIABLES = ("GALLERY_PATTERN", "PYTEST_ADDOPTS", "PYTEST_ARGS")
# A page's build output: Sphinx-Gallery renders advanced/<name>.py as
# tutorials/<name>.html.
GALLERY_DIR = "tutorials"
# The xdist group of the checker's field test (tests/test_operator_checker.py),
# which tests/conftest.py also gives to the checker package's hang test.
CHECKER_FIELD_TEST = "checker-field-test"
MATRIX = tomllib.loads((REPO / "versions" / "matrix.toml").read_text())
RELEASES = [release["torch"] for release in MATRIX["releases"]]


def in_ci():
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


def clean_environment():
    """This process's environment without the variables that narrow a build,
    nor those that tell a process it is this run's xdist worker."""
    return {
        k: v
        for k, v in os.environ.items()
        if k not in NARROWING_VARIABLES and not k.startswith("PYTEST_XDIST_")
    }


def run(cmd, *, cwd=REPO, timeout=1800, env=None):
    """Run a command, returning the completed process with text output.

    Its Pythons write bytecode, as on a reader's machine, even where this
    run's environment says not to (``PYTHONDONTWRITEBYTECODE``, as in many
    containers): the environments a test makes for itself are installed
    without it, as a reader's are, and each of their processes would
    otherwise compile what it imports again (torch alone: a second of CPU per
    process, and the checker's field test starts dozens).
    """
    return subprocess.run(
        cmd,
        cwd=cwd,
        env={
            **clean_environment(),
            "MPLBACKEND": "Agg",
            "PYTHONDONTWRITEBYTECODE": "",
            **(env or {}),
        },
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


# Debian's ccache: a folder of links named after the compilers (c++, g++...).
CCACHE = Path("/usr/lib/ccache")


def through_ccache(base, path=None):
    """Environment variables under which a build's C++ compiles go through
    ccache (where it is installed; none where it is not), keyed by their
    paths relative to ``base``, a folder holding everything the compiles name
    (the environment's headers, the sources, the build's temporary folders):
    the same build in another run's folder then reuses its object files. What
    a test of a page's build checks is the page's steps, not the compiler's
    (from empty folders on this machine, the C++ pages' builds were most of
    their run). ``path``: the PATH to put ccache's compilers in front of."""
    if not CCACHE.is_dir():
        return {}
    return {
        "PATH": os.pathsep.join([str(CCACHE), path or os.environ.get("PATH", "")]),
        "CCACHE_DIR": str(layout.cache_home() / "ccache"),
        "CCACHE_BASEDIR": str(base),
        # Compiled with -g, an object names the folder it was compiled in, so
        # ccache would key on that folder too.
        "CCACHE_NOHASHDIR": "1",
    }


def make(*targets, cwd=REPO, variables=(), timeout=3600, env=None):
    """Run make in ``cwd`` with this interpreter's environment as the venv."""
    venv = Path(sys.prefix)
    cmd = ["make", *targets, f"VENV={venv}", *variables]
    return run(cmd, cwd=cwd, timeout=timeout, env=env)


def claim_once_per_run(config, fixture):
    """Fail if another xdist worker of this run already made ``fixture``
    (its tests were not all sent to one worker: two builds of the site would
    overwrite each other's files, and two runs of the planted breakages double
    their time)."""
    worker = getattr(config, "workerinput", None)  # only in an xdist worker
    if worker is None:
        return
    run_id = worker["testrunuid"]
    claim = Path(tempfile.gettempdir()) / f"pytest-{run_id}-{fixture}"
    try:
        claim.touch(exist_ok=False)
    except FileExistsError:
        pytest.fail(
            f"{fixture} was made by two workers: the tests that need it are "
            "not all in one xdist group (see SHARED_FIXTURES)",
            pytrace=False,
        )


def downloads(page):
    """The .py and .ipynb files a built page offers for download: its own
    script and notebook (a page may offer other files, such as a module)."""
    html = page.read_text()
    found = {}
    for suffix in ("py", "ipynb"):
        own = rf'href="([^"]*_downloads/[^"]*/{re.escape(page.stem)}\.{suffix})"'
        (href,) = set(re.findall(own, html))
        found[suffix] = page.parent / href
    return found


def write_records(project, name, result="pass", real_matrix=False):
    """Records of the version matrix for ``advanced/<name>.py`` in ``project``,
    for the page as it is now.

    By default the project's matrix holds the pinned release only, where the
    page had ``result``, so a passing page's floor is the pinned release. With
    ``real_matrix`` the project gets the repository's matrix, and the page
    stops on the releases below the supported ones and passes on the others:
    its floor is the oldest supported release, as a real page's is.
    """
    versions = project / "versions"
    versions.mkdir(exist_ok=True)
    if real_matrix:
        shutil.copy(REPO / "versions" / "matrix.toml", versions / "matrix.toml")
        results = {r["torch"]: "below-floor" for r in MATRIX.get("below", [])}
        results |= {torch: "pass" for torch in RELEASES}
    else:
        (versions / "matrix.toml").write_text(matrix_toml([pinned_torch()]))
        results = {pinned_torch(): result}
    write_page_records(project, name, results)


# What every scratch project copies from the repository: the build machinery
# (configuration, extensions, Makefile and requirements), not the pages.
MACHINERY = [
    "conf.py",
    "index.rst",
    "api_index.rst",
    "Makefile",
    "requirements.txt",
    "constraints.txt",
]
# The checker package is machinery too: every environment installs it and the
# build serves its wheel.
MACHINERY_FOLDERS = [
    "_ext",
    "pagelib",
    "_static",
    "_templates",
    "tools",
    "operator_checker",
]


def scratch_project(project, pages, *, files=(), folders=()):
    """A copy of the project in the new folder ``project``, whose only pages
    are ``pages`` ({filename: source}), each with a place in the course.

    It holds the build machinery, plus ``files`` and ``folders`` of the
    repository when a test needs more (the planted breakages copy the tests).
    The pages get no version records: ``write_records`` writes them.
    """
    project.mkdir(parents=True)
    for name in [*MACHINERY, *files]:
        shutil.copy(REPO / name, project / name)
    for name in [*MACHINERY_FOLDERS, *folders]:
        shutil.copytree(
            REPO / name,
            project / name,
            ignore=shutil.ignore_patterns("__pycache__", "*.mo", "*.egg-info", "build"),
        )
    # index.rst's toctree names start_here; the real one links to every page.
    (project / "start_here.rst").write_text("Start here\n==========\n")
    (project / "advanced").mkdir()
    shutil.copy(REPO / "advanced" / "README.txt", project / "advanced")
    for filename, source in pages.items():
        (project / "advanced" / filename).write_text(source)
        course.add_page(project, filename, "A page made by a test.")
    return project


def project_with_example(tmp_path, filename, source, records=True):
    """A copy of the project whose only example is ``source`` as ``filename``.

    It keeps the build machinery and replaces the pages, so a test can watch
    how the real build treats one example of its own. With ``records``, the
    example gets version-matrix records that match it (see ``write_records``).
    """
    project = scratch_project(tmp_path / "project", {filename: source})
    if records:
        write_records(project, Path(filename).stem)
    return project


# -- Every page, run on its own ------------------------------------------------


def floor_release(name):
    floor = version_records.read(REPO, REPO / "advanced" / f"{name}.py").floor
    return next((r for r in RELEASES if version_records.minor(r) == floor), None)


# The shipping pages (``builds_wheels`` in pagelib/course.toml): their notebooks
# run on the pinned release, after the build: test_extension_wheels checks that
# they reuse the wheels the build made (a wheel is built for one release). These
# pages run on their floor in the plain venv a reader makes
# (test_download_environments). Every other page's notebook runs on its floor
# release, where it stands for the standalone run.
WHEEL_PAGES = tuple(course.builds_wheels())


def notebook_release(name):
    """The release a page's downloaded notebook runs on in CI."""
    return pinned_torch() if name in WHEEL_PAGES else floor_release(name)


def fresh_python(uv, venv, packages, timeout=1800):
    """A fresh environment at ``venv`` with ``packages`` (pip's arguments:
    requirements, wheels, ``-c constraints``), installed by uv from its cache
    as a reader's ``pip install`` would; its python."""
    made = run([str(uv), "venv", "--quiet", "--python", envs.base_python(), str(venv)])
    assert made.returncode == 0, made.stderr
    python = Path(venv) / "bin" / "python"
    install = [str(uv), "pip", "install", "--quiet", "--python", str(python)]
    installed = run(install + [str(p) for p in packages], timeout=timeout)
    assert installed.returncode == 0, installed.stderr[-3000:]
    return python


def release_python(release):
    """The python of ``release``'s matrix environment, made if missing.

    An environment with the release's requirements serves, whichever
    interpreter made it (make's or this one).
    """
    chosen = next(r for r in MATRIX["releases"] if r["torch"] == release)
    venv, requirements = envs.matrix_venv(chosen)
    wanted = {k: v for k, v in envs.stamp_for(requirements).items() if k != "python"}
    if not envs.is_complete(venv, wanted):
        envs.ensure(venv, requirements, requirements.split("\n"), f"torch {release}")
    envs.install_checker(venv)
    return venv / "bin" / "python"


def notebook_of(site, name):
    import nbformat

    notebook = nbformat.read(downloads(site.page(name))["ipynb"], as_version=4)
    nbformat.validate(notebook)
    return notebook


def printed(notebook):
    """Everything a notebook's cells printed, in order."""
    return "".join(
        output.get("text", "")
        for cell in notebook.cells
        for output in cell.get("outputs", [])
        if output.output_type == "stream"
    )
