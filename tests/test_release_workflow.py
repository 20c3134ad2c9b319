"""The checker's release workflow (.github/workflows/release-checker.yml),
rehearsed on this machine.

``tests/support/workflow_rehearsal.py`` runs the workflow's jobs here, step by step,
as a runner would (see its docstring for what is real and what is a
stand-in). A push of the tag that names the package's version runs them all:

* *build*, for real: build (as requirements.txt pins it) and twine installed
  with pip, ``python -m build`` makes the sdist and the wheel, ``twine check
  --strict`` passes them, and they are uploaded as the artifact ``dist``;
* *test*, once for the sdist and once for the wheel, for real: uv, installed
  with pip, makes a fresh environment and installs torch and torchvision (the
  versions requirements.txt pins) and the downloaded artifact with its test
  extra (this machine's caches of uv and pip stand in for the downloads: the
  files are the same), and the package's tests run against that installed
  copy, with one change: the step runs only the package's fast test files,
  not the whole suite (about 100 s, twice). test_package.py is one of them:
  it checks that the tests import the installed copy;
* *publish*: the stand-in for gh-action-pypi-publish receives exactly the
  sdist and the wheel the build made, in the environment ``pypi``, which
  the rehearsal's trusted publisher on PyPI names;
* *site*: the stand-in for gh receives the dispatch of site.yml on main,
  whose build job then runs.

A tag that names another version fails the build in one line, and no other
job runs. Planted in a copy of the workflow, a publish job without
``id-token: write`` or outside the environment is refused, and so is the
dispatch without ``actions: write``; the copy as it is passes.

Cost: about 45 s on this project's two cores (more when they are busy): the
build with pip (10 s), and for each artifact uv installed with pip (4 s),
an environment that uv links from its cache (1 s) and the fast test files,
whose first import of torch in a fresh environment compiles its bytecode
(11 s).
"""

import ast
import json
import re
import zipfile
from pathlib import Path

import envs
import pytest

from tests.support.helpers import REPO, pinned_torch
from tests.support.workflow_rehearsal import (
    SHA,
    WORKFLOWS,
    Evaluator,
    Rehearsal,
    WorkflowRun,
    condition,
    load_workflows,
    pushed,
    show,
)

pytestmark = pytest.mark.xdist_group("release-workflow")

RELEASE_YML = WORKFLOWS / "release-checker.yml"
SITE_YML = WORKFLOWS / "site.yml"
PACKAGE = REPO / "operator_checker"
REPOSITORY = "octo-org/custom-ops"
# The trusted publisher docs/dev/workflows.md says to configure on PyPI.
PUBLISHER = {
    "repository": REPOSITORY,
    "workflow": RELEASE_YML.name,
    "environment": "pypi",
}
# The package's fast test files, a few seconds: the rehearsal's stand-in for
# the whole suite.
FAST = (
    "test_package.py",
    "test_report.py",
    "test_samples.py",
    "test_targets.py",
    "test_config.py",
)
TESTS_STEP = "Run the package's tests against the installed copy"
VERSION_STEP = "Check that the tag names the package's version"
# This machine's caches of uv and pip: a runner that downloads the same files.
CACHES = {"XDG_CACHE_HOME": str(envs.cache_home().parent)}


def package_version():
    """operator_checker.__version__, read from the source."""
    tree = ast.parse((PACKAGE / "src" / "operator_checker" / "__init__.py").read_text())
    (value,) = [
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and [getattr(target, "id", None) for target in node.targets] == ["__version__"]
    ]
    return ast.literal_eval(value)


VERSION = package_version()
TAG = f"operator-checker-v{VERSION}"
SDIST = f"operator_checker-{VERSION}.tar.gz"
WHEEL = f"operator_checker-{VERSION}-py3-none-any.whl"


def pinned(name):
    """The version requirements.txt pins ``name`` at."""
    for line in (REPO / "requirements.txt").read_text().splitlines():
        if line.startswith(f"{name}=="):
            return line.split("==")[1]
    raise AssertionError(f"requirements.txt pins no {name}")


def workflow():
    return load_workflows([RELEASE_YML])[RELEASE_YML]


def step_command(data, job, name):
    for step in data["jobs"][job]["steps"]:
        if step.get("name") == name:
            return step["run"].strip()
    raise AssertionError(f"{job} has no step {name!r}")


def failed_steps(run):
    return {
        f"{job.job} {job.matrix}: {step.name}": show(step.output)
        for jobs in run.jobs.values()
        for job in jobs
        for step in job.steps
        if step.outcome == "failure"
    }


def dispatches(rehearsal):
    return [
        call for call in rehearsal.gh_calls() if call["argv"][:2] == ["workflow", "run"]
    ]


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory):
    return Rehearsal(
        tmp_path_factory.mktemp("release"), disks={"/": 19}, pypi_publisher=PUBLISHER
    )


@pytest.fixture(scope="module")
def release(rehearsal):
    """The push of the tag of the package's version, every job run."""
    original = step_command(workflow(), "test", TESTS_STEP)
    assert original.endswith(" tests"), original
    stand_in = original.removesuffix(" tests") + "".join(f" tests/{f}" for f in FAST)
    return rehearsal.run(
        RELEASE_YML,
        "push",
        ref=f"refs/tags/{TAG}",
        job_env={"build": CACHES, "test": CACHES},
        replace={TESTS_STEP: (original, stand_in)},
    )


# -- A release ---------------------------------------------------------------------


def test_a_tag_push_builds_tests_publishes_and_serves_the_checker(release):
    assert not failed_steps(release), failed_steps(release)
    for job in ("build", "test", "publish", "site"):
        assert release.results(job) == "success", job
    assert [job.matrix for job in release.jobs["test"]] == [
        {"dist": "sdist"},
        {"dist": "wheel"},
    ]
    assert release.job("build").outputs == {"version": VERSION}


def test_the_build_makes_an_sdist_and_a_wheel_that_twine_passes(release):
    build = release.job("build")
    tools = next(Path(build.env["RUNNER_TEMP"]).glob("tools/lib/python3.*"))
    for name, version in (("build", pinned("build")), ("twine", "7.0.0")):
        assert (tools / "site-packages" / f"{name}-{version}.dist-info").is_dir()
    files = release.artifacts["dist"]
    assert sorted(files) == [WHEEL, SDIST]
    # --strict: a warning (a README that will not render) fails the release.
    command = step_command(workflow(), "build", "Check them with twine")
    assert command == "twine check --strict dist/*", command
    checked = build.step("Check them with twine").output
    for name in (SDIST, WHEEL):
        assert re.search(rf"Checking dist/{re.escape(name)}: \S*PASSED", checked), show(
            checked
        )
    wheel = zipfile.ZipFile(build.workspace / "dist" / WHEEL)
    metadata = wheel.read(f"operator_checker-{VERSION}.dist-info/METADATA").decode()
    assert f"\nVersion: {VERSION}\n" in metadata
    assert "operator_checker/report.schema.json" in wheel.namelist()


@pytest.mark.parametrize(("dist", "artifact"), [("sdist", SDIST), ("wheel", WHEEL)])
def test_each_artifact_is_installed_fresh_and_its_installed_copy_tested(
    release, dist, artifact
):
    job = release.job("test", dist=dist)
    assert job.result == "success", failed_steps(release)
    (site,) = Path(job.env["RUNNER_TEMP"]).glob("venv/lib/python3.*/site-packages")
    # The artifact downloaded, installed by uv from its file.
    installed = site / f"operator_checker-{VERSION}.dist-info"
    url = json.loads((installed / "direct_url.json").read_text())["url"]
    assert url == (job.workspace / "dist" / artifact).as_uri(), url
    assert (site / "operator_checker" / "report.schema.json").is_file()
    # torch and torchvision as requirements.txt pins them; the test extra.
    for name, version in (
        ("torch", pinned_torch()),
        ("torchvision", pinned("torchvision")),
    ):
        assert (site / f"{name}-{version}.dist-info").is_dir(), name
    for extra in ("pytest", "jsonschema"):
        assert list(site.glob(f"{extra}-*.dist-info")), extra
    # The fast files ran, against that copy (test_package.py checks the
    # folder the tests import it from), and passed.
    output = job.step(TESTS_STEP).output
    for name in FAST:
        assert f"tests/{name} " in output, show(output)
    assert re.search(r"=+ \d+ passed in ", output), show(output)


def test_the_publish_job_uploads_exactly_the_built_files(release, rehearsal):
    uploads = [u for u in rehearsal.published if u["ref"] == f"refs/tags/{TAG}"]
    assert len(uploads) == 1, uploads
    (upload,) = uploads
    built = release.job("build").workspace / "dist"
    assert upload["files"] == {p.name: p.read_bytes() for p in built.iterdir()}
    assert sorted(upload["files"]) == [WHEEL, SDIST]
    assert upload["repository-url"] == "https://upload.pypi.org/legacy/"
    assert {k: upload[k] for k in PUBLISHER} == PUBLISHER
    assert release.job("publish").environment == {
        "name": "pypi",
        "url": f"https://pypi.org/project/operator-checker/{VERSION}/",
    }


def test_then_the_site_is_built_and_deployed_from_main(release, rehearsal):
    assert {
        "argv": ["workflow", "run", "site.yml", "--ref", "main"],
        "repo": REPOSITORY,
        "token": True,
    } in dispatches(rehearsal)
    # That dispatch builds both editions (and so the wheel under wheels/).
    site = load_workflows([SITE_YML])[SITE_YML]
    always = {name: lambda: True for name in ("success", "always")}
    dispatched = Evaluator(
        {
            "github": {"event_name": "workflow_dispatch", "ref": "refs/heads/main"},
            "vars": {},
        },
        always,
    )
    assert condition(site["jobs"]["build"].get("if"), dispatched)
    assert site["jobs"]["deploy"]["needs"] == ["test", "build"]


# -- What stops a release --------------------------------------------------------------


def test_a_tag_of_another_version_fails_the_build_in_one_line(rehearsal):
    published, dispatched = len(rehearsal.published), len(dispatches(rehearsal))
    other = "0.0.1"
    assert other != VERSION
    run = rehearsal.run(RELEASE_YML, "push", ref=f"refs/tags/operator-checker-v{other}")
    step = run.job("build").step(VERSION_STEP)
    assert step.outcome == "failure"
    assert step.output.strip().splitlines() == [
        f"::error::the tag operator-checker-v{other} releases {other}, but "
        f"operator_checker.__version__ is {VERSION}: tag the commit that sets it"
    ]
    assert run.results("build") == "failure"
    for job in ("test", "publish", "site"):
        assert run.results(job) == "skipped", job
    assert "dist" not in run.artifacts
    assert len(rehearsal.published) == published
    assert len(dispatches(rehearsal)) == dispatched


def test_only_a_tag_of_the_checker_starts_a_release():
    data = workflow()
    assert data["on"] == {"push": {"tags": ["operator-checker-v*"]}}
    trigger = data["on"]["push"]
    assert pushed(trigger, f"refs/tags/{TAG}")
    for ref in ("refs/heads/main", "refs/tags/v1.0.0", "refs/tags/operator-checker"):
        assert not pushed(trigger, ref), ref


def planted(folder, change):
    """A copy of the workflow with one change (a function of its data),
    written as JSON (YAML reads it) under the workflow's own name."""
    data = workflow()
    change(data["jobs"])
    path = folder / RELEASE_YML.name
    path.write_text(json.dumps(data, indent=1))
    return path


PLANTED = {
    "as it is": (lambda jobs: None, "publish", None),
    "publish without id-token: write": (
        lambda jobs: jobs["publish"].update(permissions={}),
        "publish",
        "OpenID Connect token retrieval failed",
    ),
    "publish outside the environment": (
        lambda jobs: jobs["publish"].pop("environment"),
        "publish",
        "`invalid-publisher`: valid token, but no corresponding publisher",
    ),
    "publish in another environment": (
        lambda jobs: jobs["publish"].update(environment="testpypi"),
        "publish",
        "`invalid-publisher`: valid token, but no corresponding publisher",
    ),
    "dispatch without actions: write": (
        lambda jobs: jobs["site"].update(permissions={}),
        "site",
        "HTTP 403: Resource not accessible by integration",
    ),
}


@pytest.mark.parametrize("plant", list(PLANTED))
def test_publishing_and_the_dispatch_are_refused_without_their_grants(
    plant, release, rehearsal, tmp_path
):
    change, job, refusal = PLANTED[plant]
    path = planted(tmp_path, change)
    published, dispatched = len(rehearsal.published), len(dispatches(rehearsal))
    # The job alone, after the release's own build and tests (a re-run).
    before = ["build", "test"] + (["publish"] if job == "site" else [])
    previous = WorkflowRun(
        path,
        "push",
        release.run_id,
        artifacts=dict(release.artifacts),
        jobs={name: release.jobs[name] for name in before},
    )
    run = rehearsal.run(
        path, "push", ref=f"refs/tags/{TAG}", only=[job], previous=previous
    )
    ran = run.job(job)
    if refusal is None:
        assert ran.result == "success", failed_steps(run)
        assert len(rehearsal.published) == published + 1
        rehearsal.published.pop()
        return
    assert ran.result == "failure"
    (failed,) = [step for step in ran.steps if step.outcome == "failure"]
    assert refusal in failed.output, show(failed.output)
    assert len(rehearsal.published) == published
    assert len(dispatches(rehearsal)) == dispatched + (job == "site")


# -- Pins ------------------------------------------------------------------------------

USES = re.compile(r"^\s*(?:-\s+)?uses:\s*(\S+?)@(\S+)(.*)$")


def test_every_action_is_pinned_to_a_release_commit_the_same_everywhere():
    pins = {}
    for path in sorted(WORKFLOWS.glob("*.yml")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            found = USES.match(line)
            if not found:
                continue
            action, pin, comment = found.groups()
            where = f"{path.name}:{number}"
            assert SHA.fullmatch(pin), f"{where}: {action} pinned to {pin}"
            tag = re.fullmatch(r"\s*# (v\d+\.\d+\.\d+)", comment)
            assert tag, f"{where}: {action}'s pin lacks its release (# vX.Y.Z)"
            pins.setdefault(action, set()).add((pin, tag.group(1)))
    assert all(len(found) == 1 for found in pins.values()), pins
    assert pins["pypa/gh-action-pypi-publish"] == {
        ("81e9d935c883d0b210363ab89cf05f3894778450", "v1.8.14")
    }
