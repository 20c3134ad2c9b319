"""Shared fixtures: the repository, its examples, and one full build of the site.

The tests treat the examples as black boxes: they run them, build them, and
read what the build produced.
"""

import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import nbformat
import pytest
from _pytest.nodeid import NodeId

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = sorted(p.stem for p in (REPO / "advanced").glob("*.py"))
# Variables that would make a build or a test run do less than it should.
NARROWING_VARIABLES = ("GALLERY_PATTERN", "PYTEST_ADDOPTS", "PYTEST_ARGS")
# A page's build output: Sphinx-Gallery renders advanced/<name>.py as
# tutorials/<name>.html.
GALLERY_DIR = "tutorials"
MATRIX = tomllib.loads((REPO / "versions" / "matrix.toml").read_text())
RELEASES = [release["torch"] for release in MATRIX["releases"]]
sys.path.insert(0, str(REPO / "_ext"))
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tools"))
import envs  # noqa: E402

from pagelib import contract  # noqa: E402
from pagelib import records as version_records  # noqa: E402


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


def pytest_configure(config):
    """Under CI, refuse to run less than the whole suite."""
    if not in_ci():
        return
    narrowed = [name for name in NARROWING_VARIABLES if os.environ.get(name)]
    if config.option.keyword:
        narrowed.append(f"-k {config.option.keyword}")
    if config.option.markexpr:
        narrowed.append(f"-m {config.option.markexpr}")
    if config.option.deselect:
        narrowed.append("--deselect")
    tests_dir = Path(__file__).resolve().parent
    for arg in config.args:
        if Path(arg.split("::")[0]).resolve() not in (tests_dir, REPO):
            narrowed.append(arg)
    if narrowed:
        raise pytest.UsageError(
            "CI runs the whole suite, but it was narrowed by: " + ", ".join(narrowed)
        )


# Session fixtures that take minutes to make. `make test` runs the suite in
# pytest-xdist workers, one per core (``--dist loadgroup``); every test that
# needs one of these is sent to the same worker, so each is made once per run
# (``claim_once_per_run`` fails a second).
SHARED_FIXTURES = ("site", "outcomes")


def xdist_group(item):
    """The group a test is marked with, or the shared fixture it needs."""
    marker = item.get_closest_marker("xdist_group")
    if marker:
        return marker.args[0]
    needed = [name for name in SHARED_FIXTURES if name in item.fixturenames]
    if len(needed) > 1:
        raise pytest.UsageError(
            f"{item.nodeid} needs {needed}: a test may need one of "
            f"{SHARED_FIXTURES}, or each would be made in two workers"
        )
    return needed[0] if needed else None


def pytest_collection_modifyitems(config, items):
    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        group = xdist_group(item)
        if group:
            # xdist's scheduler reads a test's group from the suffix of its
            # node id. pytest-xdist 3.8 writes it to ``item._nodeid``, which
            # pytest 9 no longer reads (a node's id is ``item._id``), so the
            # groups would be silently ignored: the suffix is written here.
            item._id = NodeId.parse(f"{item.nodeid}@{group}")


def run(cmd, *, cwd=REPO, timeout=1800, env=None):
    """Run a command, returning the completed process with text output."""
    return subprocess.run(
        cmd,
        cwd=cwd,
        env={**clean_environment(), "MPLBACKEND": "Agg", **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def make(*targets, cwd=REPO, variables=(), timeout=3600, env=None):
    """Run make in ``cwd`` with this interpreter's environment as the venv."""
    venv = Path(sys.prefix)
    cmd = ["make", *targets, f"VENV={venv}", *variables]
    return run(cmd, cwd=cwd, timeout=timeout, env=env)


@pytest.fixture(scope="session")
def uv():
    """uv, installed from the registry by tools/envs.py if need be."""
    found = envs.uv_executable()
    if found is None:
        if in_ci():
            pytest.fail("uv could not be installed")
        pytest.skip("uv could not be installed")
    return found


def pinned_torch():
    """The torch version requirements.txt pins: the site's own release."""
    text = (REPO / "requirements.txt").read_text()
    return re.search(r"^torch==(\S+)", text, re.M).group(1)


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


def floor_check(major_minor):
    """A page's first cell, as README.md ("Adding a page") prescribes it."""
    major, minor = major_minor.split(".")
    return (
        "import sys\n\nimport torch\n\n"
        'if tuple(int(part) for part in torch.__version__.split(".")[:2]) < '
        f"({major}, {minor}):\n"
        f'    sys.exit(f"This page needs PyTorch {major_minor} or later; this is '
        '{torch.__version__}.")\n'
    )


def example_source(title, body, summary="This page is an example made by a test."):
    """A minimal valid page whose floor is the pinned release, then ``body``."""
    floor = ".".join(pinned_torch().split(".")[:2])
    underline = "=" * len(title)
    return f'''"""
{title}
{underline}

{summary} It has a second sentence.

.. grid:: 2

    .. grid-item-card:: Prerequisites

       * PyTorch {floor} or later

.. admonition:: Checklist
   :class: checklist

   #. Read this page.
"""

# %%
{floor_check(floor)}
print(f"PyTorch {{torch.__version__}}; devices exercised: ['cpu'] (no CUDA)")

# %%
{body}
'''


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
    (versions / "records").mkdir(parents=True, exist_ok=True)
    if real_matrix:
        shutil.copy(REPO / "versions" / "matrix.toml", versions / "matrix.toml")
        results = [(r["torch"], "below-floor") for r in MATRIX.get("below", [])]
        results += [(torch, "pass") for torch in RELEASES]
    else:
        (versions / "matrix.toml").write_text(
            f'[pages]\npackages = []\n\n[[releases]]\ntorch = "{pinned_torch()}"\n'
        )
        results = [(pinned_torch(), result)]
    digest = contract.code_digest(project / "advanced" / f"{name}.py")
    records = {
        torch: {
            "code_digest": digest,
            "result": outcome,
            "error": None,
            "seconds": 1.0,
            "torch": torch,
            "devices": ["cpu"],
            "ran_at": "2026-01-01T00:00:00+00:00",
        }
        for torch, outcome in results
    }
    (versions / "records" / f"{name}.json").write_text(
        json.dumps(records, indent=1) + "\n"
    )


def project_with_example(tmp_path, filename, source, records=True):
    """A copy of the project whose only example is ``source`` as ``filename``.

    It keeps the build machinery (configuration, extensions, Makefile and
    requirements) and replaces the pages, so a test can watch how the real
    build treats one example of its own. With ``records``, the example gets
    version-matrix records that match it (see ``write_records``).
    """
    project = tmp_path / "project"
    project.mkdir()
    for name in [
        "conf.py",
        "index.rst",
        "api_index.rst",
        "Makefile",
        "requirements.txt",
        "constraints.txt",
    ]:
        shutil.copy(REPO / name, project / name)
    for folder in ["_ext", "pagelib", "_static", "_templates", "tools"]:
        shutil.copytree(
            REPO / folder,
            project / folder,
            ignore=shutil.ignore_patterns("__pycache__", "*.mo"),
        )
    # index.rst's toctree names start_here; the real one links to every page.
    (project / "start_here.rst").write_text("Start here\n==========\n")
    (project / "advanced").mkdir()
    shutil.copy(REPO / "advanced" / "README.txt", project / "advanced")
    (project / "advanced" / filename).write_text(source)
    with open(project / "pagelib" / "course.py", "a") as course:
        course.write(f"\nCOURSE[{filename!r}] = 'A page made by a test.'\n")
    if records:
        write_records(project, Path(filename).stem)
    return project


class Site:
    """The result of building the site once: its log, warnings and HTML tree."""

    def __init__(self, html_dir, process):
        self.html = html_dir
        self.process = process
        self.notebook_runs = None  # started by ``site`` when this run needs them
        output = process.stdout + process.stderr
        self.warnings = "\n".join(
            line
            for line in output.splitlines()
            if re.search(r"\b(WARNING|ERROR)\b", line)
        )

    def page(self, name):
        return self.html / GALLERY_DIR / f"{name}.html"


@pytest.fixture(scope="session")
def site(request, tmp_path_factory):
    """Build the whole site from a clean tree, exactly as `make html` does.

    Nothing an earlier build left behind is read: ``make clean`` removes the
    generated gallery and the HTML first, so every example runs, every
    notebook is written anew and the tests see what this checkout builds.
    When the build fails, every test that reads it fails with the reason.
    """
    claim_once_per_run(request.config, "site")
    cleaned = make("clean")
    assert cleaned.returncode == 0, cleaned.stderr
    assert not (REPO / GALLERY_DIR).exists() and not (REPO / "_build" / "html").exists()
    process = make("html")
    if process.returncode != 0:
        pytest.fail(
            "make html failed, so nothing it should have built can be tested:\n"
            + (process.stdout[-3000:] + process.stderr[-6000:]),
            pytrace=False,
        )
    site = Site(REPO / "_build" / "html", process)
    if any("executed_notebooks" in item.fixturenames for item in request.session.items):
        # Started now, they run while the browser reads the site.
        site.notebook_runs = start_notebook_runs(site, tmp_path_factory)
    return site


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


# -- Every page, run on its own ------------------------------------------------


def floor_release(name):
    floor = version_records.read(REPO, REPO / "advanced" / f"{name}.py").floor
    return next((r for r in RELEASES if version_records.minor(r) == floor), None)


# The shipping pages' notebooks run on the pinned release, after the build:
# test_extension_wheels checks that they reuse the wheels the build made (a
# wheel is built for one release). These pages run on their floor in the plain
# venv a reader makes (test_download_environments). Every other page's
# notebook runs on its floor release, where it stands for the standalone run.
WHEEL_PAGES = ("cpp_extension_packaging", "cpp_stable_abi")


def notebook_release(name):
    """The release a page's downloaded notebook runs on in CI."""
    return pinned_torch() if name in WHEEL_PAGES else floor_release(name)


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
    return venv / "bin" / "python"


def notebook_of(site, name):
    notebook = nbformat.read(downloads(site.page(name))["ipynb"], as_version=4)
    nbformat.validate(notebook)
    return notebook


def release_kernels(releases, folder):
    """A Jupyter kernel spec for each release: the pinned one is this
    interpreter's own kernel (``python3``), with the compiler caches ``make``
    exported; an older one runs in that release's matrix environment (which
    holds ipykernel), with the caches the matrix keeps for it."""
    from jupyter_client.kernelspec import KernelSpecManager

    for release in set(releases) - {pinned_torch()}:
        spec = {
            "argv": [str(release_python(release)), "-X", "faulthandler"]
            + ["-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": f"PyTorch {release}",
            "language": "python",
            "env": envs.release_caches(release),
        }
        (folder / f"torch-{release}").mkdir(parents=True)
        (folder / f"torch-{release}" / "kernel.json").write_text(json.dumps(spec))
    manager = KernelSpecManager(kernel_dirs=[str(folder)])
    names = {r: "python3" if r == pinned_torch() else f"torch-{r}" for r in releases}
    return manager, names


# A cell the fixture adds after a notebook's last one, to read which torch the
# kernel imported (and removes again before any test reads the notebook).
PROBE = "import torch as _probe\nprint(_probe.__version__)"


def start_notebook_runs(site, tmp_path_factory):
    """Start running every downloaded notebook in a fresh kernel, one per
    core at a time, on ``notebook_release(name)``; ``{name: future}`` of
    ``(notebook, error, torch version)``."""
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient

    # Folders are made here, not in the threads: the first mktemp of a worker
    # makes pytest's base folder, and two threads racing to make it fail.
    folders = {name: tmp_path_factory.mktemp(f"notebook-{name}") for name in EXAMPLES}
    releases = {name: notebook_release(name) for name in EXAMPLES}
    specs, kernels = release_kernels(
        releases.values(), tmp_path_factory.mktemp("kernels")
    )

    notebooks = {name: notebook_of(site, name) for name in EXAMPLES}

    def execute(name):
        notebook = notebooks[name]
        notebook.cells.append(nbformat.v4.new_code_cell(PROBE))
        kernel = KernelManager(
            kernel_name=kernels[releases[name]], kernel_spec_manager=specs
        )
        client = NotebookClient(
            notebook,
            km=kernel,
            timeout=900,
            resources={"metadata": {"path": str(folders[name])}},
        )
        try:
            client.execute()
            error = None
        except Exception as failure:  # noqa: BLE001 - the page's test reports it
            error = failure  # a CellExecutionError names the failing cell
        finally:
            # The client leaves a kernel it was given running: stop it (and
            # what it started) now, not when the worker exits.
            if kernel.has_kernel:
                kernel.shutdown_kernel(now=True)
        probe = notebook.cells.pop()
        version = "".join(o.get("text", "") for o in probe.get("outputs", []))
        return notebook, error, version.strip()

    pool = concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 1)
    runs = {name: pool.submit(execute, name) for name in EXAMPLES}
    pool.shutdown(wait=False)
    return runs


@pytest.fixture(scope="session")
def executed_notebooks(site, tmp_path_factory):
    """Every downloaded notebook's run: ``{name: (notebook, error, torch
    version)}``, see ``start_notebook_runs``.

    On a page's floor, the run also stands for the page's standalone run
    there: the notebook holds all of the script's code and runs from an
    empty folder in a fresh interpreter.
    """
    runs = site.notebook_runs or start_notebook_runs(site, tmp_path_factory)
    return {name: run.result() for name, run in runs.items()}


def printed(notebook):
    """Everything a notebook's cells printed, in order."""
    return "".join(
        output.get("text", "")
        for cell in notebook.cells
        for output in cell.get("outputs", [])
        if output.output_type == "stream"
    )
