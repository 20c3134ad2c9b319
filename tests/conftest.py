"""Shared fixtures: the repository, its examples, and one full build of the site.

The tests treat the examples as black boxes: they run them, build them, and
read what the build produced.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = sorted(p.stem for p in (REPO / "advanced").glob("*.py"))
# A page's build output: Sphinx-Gallery renders advanced/<name>.py as
# tutorials/<name>.html.
GALLERY_DIR = "tutorials"


def run(cmd, *, cwd=REPO, timeout=1800, env=None):
    """Run a command, returning the completed process with text output."""
    return subprocess.run(
        cmd,
        cwd=cwd,
        env={**os.environ, "MPLBACKEND": "Agg", **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def make(*targets, cwd=REPO, variables=(), timeout=3600):
    """Run make in ``cwd`` with this interpreter's environment as the venv."""
    venv = Path(sys.prefix)
    cmd = ["make", *targets, f"VENV={venv}", *variables]
    return run(cmd, cwd=cwd, timeout=timeout)


def project_with_example(tmp_path, filename, source):
    """A copy of the project whose only example is ``source`` as ``filename``.

    It keeps the build machinery (configuration, extensions, Makefile and
    requirements) and replaces the pages, so a test can watch how the real
    build treats one example of its own.
    """
    project = tmp_path / "project"
    project.mkdir()
    for name in [
        "conf.py",
        "index.rst",
        "Makefile",
        "requirements.txt",
        "constraints.txt",
    ]:
        shutil.copy(REPO / name, project / name)
    for folder in ["_ext", "_static"]:
        shutil.copytree(
            REPO / folder, project / folder, ignore=lambda *_: ["__pycache__"]
        )
    # index.rst's toctree names start_here; the real one links to every page.
    (project / "start_here.rst").write_text("Start here\n==========\n")
    (project / "advanced").mkdir()
    shutil.copy(REPO / "advanced" / "README.txt", project / "advanced")
    (project / "advanced" / filename).write_text(source)
    return project


class Site:
    """The result of building the site once: its log, warnings and HTML tree."""

    def __init__(self, html_dir, process, warnings):
        self.html = html_dir
        self.process = process
        self.warnings = warnings

    def page(self, name):
        return self.html / GALLERY_DIR / f"{name}.html"


@pytest.fixture(scope="session")
def site():
    """Build the whole site the way `make html` does, warnings as errors.

    -E rereads every source so that each page's warnings are reported again
    even when an earlier build is up to date. Sphinx-Gallery re-executes an
    example only when its source changed since it last ran successfully, so
    after `make html` this does not run the examples a second time, while a
    fresh clone (CI) runs them all here.
    """
    build_dir = REPO / "_build"
    warnings_file = build_dir / "warnings.log"
    build_dir.mkdir(exist_ok=True)
    warnings_file.unlink(missing_ok=True)
    process = make(
        "html",
        variables=[f"SPHINXOPTS=-E -W --keep-going -w {warnings_file}"],
    )
    warnings = warnings_file.read_text() if warnings_file.exists() else ""
    return Site(build_dir / "html", process, warnings)
