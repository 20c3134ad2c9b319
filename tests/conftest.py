"""The slow lane's fixtures and hooks: one full build of the site, every
notebook's run, and the CI guard; the helpers the tests import are in
helpers.py (and pages.py), the fast lane's fixtures in unit/conftest.py.

The tests treat the examples as black boxes: they run them, build them, and
read what the build produced.
"""

import concurrent.futures
import json
import os
import re
import resource
from pathlib import Path

import envs
import pytest
from _pytest.nodeid import NodeId

from tests.support.helpers import (
    CHECKER_FIELD_TEST,
    EXAMPLES,
    GALLERY_DIR,
    NARROWING_VARIABLES,
    REPO,
    claim_once_per_run,
    in_ci,
    make,
    notebook_of,
    notebook_release,
    pinned_torch,
    release_python,
)

TESTS_DIR = Path(__file__).resolve().parent
# The fast lane (`make unit`), a whole run of its own: CI may run it alone.
UNIT_DIR = TESTS_DIR / "unit"
# The checker package's tests, which the suite runs too (testpaths). Run
# alone, from their folder or with it named, they are the package's own run,
# with its own settings (operator_checker/pyproject.toml), and this file is
# not loaded.
CHECKER_TESTS = REPO / "operator_checker" / "tests"


def pytest_configure(config):
    """Under CI, refuse to run less than the whole suite (or the whole fast
    lane, tests/unit, which `make unit` runs)."""
    if not in_ci():
        return
    narrowed = [name for name in NARROWING_VARIABLES if os.environ.get(name)]
    if config.option.keyword:
        narrowed.append(f"-k {config.option.keyword}")
    if config.option.markexpr:
        narrowed.append(f"-m {config.option.markexpr}")
    if config.option.deselect:
        narrowed.append("--deselect")
    chosen = [Path(arg.split("::")[0]).resolve() for arg in config.args]
    if chosen != [UNIT_DIR]:
        narrowed += [
            arg
            for arg, path in zip(config.args, chosen, strict=True)
            if path not in (TESTS_DIR, REPO, CHECKER_TESTS)
        ]
        if REPO not in chosen and CHECKER_TESTS not in chosen:
            narrowed.append(f"no {CHECKER_TESTS.relative_to(REPO)}")
    if narrowed:
        raise pytest.UsageError(
            "CI runs the whole suite, but it was narrowed by: " + ", ".join(narrowed)
        )


# Session fixtures that take minutes to make. `make test` runs the suite in
# pytest-xdist workers, one per core (``--dist loadgroup``); every test that
# needs one of these is sent to the same worker, so each is made once per run
# (``claim_once_per_run`` fails a second). A module whose module-scoped
# fixture is costly marks its tests with a group of their own
# (``pytest.mark.xdist_group``): a module's fixture is made once per worker
# that runs any of its tests.
SHARED_FIXTURES = ("site", "outcomes")
# Tests of the checker package (whose folder this file does not mark) that
# join a group: this one waits half a minute for a hung operator, and in the
# field test's group it waits while the other worker surveys the site with
# several browsers, rather than near the end of the run, where xdist sends
# the tests of no group and an idle core is the run's time.
JOINED = {
    "operator_checker/tests/test_isolation.py::"
    "test_the_command_survives_a_crash_and_a_hang": CHECKER_FIELD_TEST,
}


def xdist_group(item):
    """The shared fixture a test needs, or else the group it is marked with
    (a marked module's test that needs the site goes where the site is)."""
    needed = [name for name in SHARED_FIXTURES if name in item.fixturenames]
    if len(needed) > 1:
        raise pytest.UsageError(
            f"{item.nodeid} needs {needed}: a test may need one of "
            f"{SHARED_FIXTURES}, or each would be made in two workers"
        )
    if needed:
        return needed[0]
    marker = item.get_closest_marker("xdist_group")
    return marker.args[0] if marker else JOINED.get(item.nodeid)


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


@pytest.fixture(scope="session")
def uv():
    """uv, installed from the registry by tools/envs.py if need be."""
    found = envs.uv_executable()
    if found is None:
        if in_ci():
            pytest.fail("uv could not be installed")
        pytest.skip("uv could not be installed")
    return found


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


# -- Every page, run on its own ------------------------------------------------


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
    import nbformat
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


# -- Where the time goes -------------------------------------------------------

# Every test's setup, call and teardown seconds, its CPU seconds, when it
# started and stopped and in which worker, written by the run's main process
# (the xdist controller gets every worker's reports) when the session ends:
# `make bench-ci` (tools/bench_ci.py) reads it from a fresh clone's run.
DURATIONS = REPO / "_build" / "test-durations.json"


def cpu_seconds():
    """CPU seconds of this process and of every process it has waited for."""
    return sum(
        usage.ru_utime + usage.ru_stime
        for usage in map(
            resource.getrusage, (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
        )
    )


_CPU_AT_START = {}


def pytest_runtest_logstart(nodeid):
    _CPU_AT_START[nodeid] = cpu_seconds()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """The teardown's report carries the CPU seconds of the whole test (its
    process's and those of the processes it waited for: a background run it
    started is counted in the test that reaps it)."""
    report = yield
    if call.when == "teardown" and item.nodeid in _CPU_AT_START:
        spent = cpu_seconds() - _CPU_AT_START.pop(item.nodeid)
        report.user_properties.append(("cpu", round(spent, 2)))
    return report


def pytest_runtest_logreport(report):
    durations = _durations()
    if durations is None:
        return
    test = durations.setdefault(report.nodeid, {})
    test[report.when] = round(report.duration, 2)
    cpu = dict(report.user_properties).get("cpu")
    if cpu is not None:
        test["cpu"] = cpu
    # When it ran and in which worker, for the timeline of `make bench-ci`.
    if report.when == "setup":
        test["start"] = round(report.start, 2)
        node = getattr(report, "node", None)  # the xdist worker that ran it
        test["worker"] = node.gateway.id if node is not None else "main"
    test["stop"] = round(report.stop, 2)


def pytest_sessionfinish(session):
    durations = _durations()
    if durations is None or not durations:
        return
    DURATIONS.parent.mkdir(parents=True, exist_ok=True)
    DURATIONS.write_text(json.dumps(durations, indent=0, sort_keys=True) + "\n")


_RECORDED = {}


def _durations():
    """The running record, in the main process only (None in an xdist worker,
    whose reports reach the controller anyway)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return None
    return _RECORDED
