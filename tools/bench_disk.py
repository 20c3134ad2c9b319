"""The disk each workflow job's environments take, measured on this machine.

``make bench-disk`` makes every environment of the version matrix that is
missing (``tools/envs.py``), then measures with ``du`` (each file counted
once: uv links the environments' files to its cache, and they share most of
them) what each job of the workflows holds at once:

* ``test`` (site.yml): the site's environment and every supported release's;
* ``cpu`` (matrix.yml, one shard): the site's and one release's, the largest
  pair (the release below the supported ones included);
* ``build`` (site.yml): the site's alone.

It writes ``.ci/environment-disk.json``, with the machine it was measured on
(``benchmarks.stamp``), and the table ``docs/dev/workflows.md`` shows
(``guide.write``). The file is committed: the workflow
tests check that each job's ``.ci/free-disk`` step asks for at least that
much (``tests/test_workflows.py``), and that the figures were measured for
the matrix and the pins as they are now. Run it again after changing
``versions/matrix.toml`` or the requirements; the test says so when needed.
"""

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tools"))
import benchmarks  # noqa: E402
import envs  # noqa: E402
import guide  # noqa: E402

FIGURES = REPO / ".ci" / "environment-disk.json"


def du_gib(*folders):
    """The disk ``folders`` take together, each file counted once."""
    process = subprocess.run(
        ["du", "-s", "-c", "-B1", *map(str, folders)],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(process.stdout.splitlines()[-1].split()[0]) / 2**30


def release_venv(release):
    venv, requirements = envs.matrix_venv(release)
    envs.ensure(
        venv, requirements, requirements.split("\n"), f"torch {release['torch']}"
    )
    return venv


def key():
    """What the figures were measured for: the site's pins and the matrix."""
    return {
        "requirements": envs.stamp_for(
            (REPO / "requirements.txt").read_text()
            + (REPO / "constraints.txt").read_text()
        )["requirements_sha256"],
        "releases": [release["torch"] for release in envs.all_releases()],
    }


def measure(site):
    supported = {r["torch"]: release_venv(r) for r in envs.releases()}
    below = {r["torch"]: release_venv(r) for r in envs.load_matrix().get("below", [])}
    pairs = {r: du_gib(site, venv) for r, venv in {**supported, **below}.items()}
    jobs = {
        "test": du_gib(site, *supported.values()),
        "cpu": max(pairs.values()),
        "build": du_gib(site),
    }
    return {
        **benchmarks.stamp(),
        "measured_for": key(),
        "jobs": {job: round(gib, 1) for job, gib in jobs.items()},
        "shards": {release: round(gib, 1) for release, gib in pairs.items()},
    }


def main():
    site = Path(sys.prefix)
    figures = measure(site)
    FIGURES.write_text(json.dumps(figures, indent=1) + "\n")
    print(
        "environments per job (GiB): "
        + ", ".join(f"{job} {gib:.1f}" for job, gib in figures["jobs"].items())
        + "; shards: "
        + ", ".join(f"{r} {gib:.1f}" for r, gib in figures["shards"].items())
    )
    print(f"wrote {FIGURES.relative_to(REPO)}")
    for line in guide.write():
        print(line)


if __name__ == "__main__":
    main()
