"""Create the virtual environments the site and its version matrix run in.

``make`` calls this script with the interpreter it was given (``PYTHON``), so it
uses the standard library only. Every environment it makes is trusted only
once its install has finished: the last step writes a stamp file naming the
requirements and the interpreter it was built from. An environment without a
matching stamp (an install that failed or was killed, another interpreter, other
requirements) is deleted and built again, never reused as if it were good.

Packages are installed with `uv <https://docs.astral.sh/uv/>`_, which the
script first installs from the package registry into a small environment of its
own beside the others. uv keeps one cache of unpacked wheels and links the
environments' files to it, so a dozen environments holding the same CUDA
libraries store them once. When uv cannot be installed, pip does the work
(slower, and each environment holds its own copy); either way one line says
which one ran. Either way the environment gets its packages' bytecode at
install time (uv's ``--compile-bytecode``; pip does it by default): every
process the site, the matrix and the tests start imports torch, and where
``PYTHONDONTWRITEBYTECODE`` is set (as in many containers) nothing else would
ever write it, so each process would compile torch's modules again (measured:
a third to a half of a page's CPU time).

Before installing, the script checks what a fresh machine may lack and stops
with one line naming it: a supported Python, enough free disk, and, when the
install fails, whether the package registry could be reached at all.

    python tools/envs.py site --venv DIR             the site's environment
    python tools/envs.py releases [--json] [RELEASE ...]
                                                     the matrix's releases, one
                                                     a line or as a JSON list
                                                     (matrix.py plan lists them
                                                     for the workflow)
    python tools/envs.py tools --venv DIR --requirements FILE
                                                     a small environment of
                                                     tools (the workflow linters)
    python tools/envs.py prune --keep-venv DIR       delete environments this
                                                     checkout no longer uses
"""

import argparse
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from pagelib import checker, layout  # noqa: E402 - the standard library only

# The interpreters the site is tested with: the pinned packages (NumPy 2.4,
# Sphinx 9) need 3.11 or newer, and 3.11, 3.12 and 3.13 build it.
SUPPORTED_PYTHONS = ((3, 11), (3, 12), (3, 13))
# The uv release to install, and what one environment takes on disk when its
# files are not shared (torch with its CUDA libraries), checked before
# installing. The tests change both through the environment to exercise the
# pip fallback and the disk check.
UV_VERSION = os.environ.get("PYTORCH_SITE_UV_VERSION", "0.13.8")
NEEDED_GIB = float(os.environ.get("PYTORCH_SITE_NEEDED_GIB", "6"))
STAMP = ".complete.json"
MATRIX_FILE = REPO / layout.MATRIX


cache_home = layout.cache_home


def say(message):
    print(f"envs: {message}", flush=True)


def stop(message):
    """One line on stderr, and a non-zero exit: what make shows the user."""
    print(f"error: {message}", file=sys.stderr, flush=True)
    sys.exit(2)


# -- What a fresh machine may lack ---------------------------------------------


def python_version_text(version=None):
    version = version or sys.version_info
    return f"{version[0]}.{version[1]}"


def check_python():
    if tuple(sys.version_info[:2]) not in SUPPORTED_PYTHONS:
        wanted = ", ".join(python_version_text(v) for v in SUPPORTED_PYTHONS)
        stop(
            f"{sys.executable} is Python {python_version_text()}; the site needs "
            f"Python {wanted}. Choose another with PYTHON=, e.g. "
            f"`make html PYTHON=python3.11`."
        )


def check_disk(folder):
    folder.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(folder).free / 2**30
    if free < NEEDED_GIB:
        stop(
            f"only {free:.1f} GiB free on the disk holding {folder}; a new "
            f"environment needs about {NEEDED_GIB:.0f} GiB. Free some space or point "
            "XDG_CACHE_HOME (or VENV=) at a larger disk."
        )


def registry_url():
    """The index pip and uv would ask: the configured one or PyPI."""
    for variable in ("UV_INDEX_URL", "UV_DEFAULT_INDEX", "PIP_INDEX_URL"):
        if os.environ.get(variable):
            return os.environ[variable].split()[0]
    return "https://pypi.org/simple/"


def registry_unreachable():
    """Why the package registry cannot be reached, or None if it can."""
    url = registry_url()
    if not url.startswith(("http://", "https://")):
        return None
    try:
        with urllib.request.urlopen(url, timeout=15):
            return None
    except urllib.error.HTTPError:
        return None  # it answered
    except (OSError, ValueError) as error:
        reason = getattr(error, "reason", error)
        return f"could not reach the package registry at {url} ({reason})"


# -- Installers ------------------------------------------------------------------


def run(command, **kwargs):
    return subprocess.run(command, text=True, capture_output=True, **kwargs)


def uv_executable():
    """uv, installed into an environment of its own; None if that fails."""
    home = cache_home() / f"uv-{UV_VERSION}"
    uv = home / "bin" / "uv"
    stamp = home / STAMP
    if stamp.is_file() and uv.is_file():
        return uv
    home.parent.mkdir(parents=True, exist_ok=True)
    with open(home.parent / f".{home.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.is_file() and uv.is_file():
            return uv
        return _install_uv(home, uv, stamp)


def _install_uv(home, uv, stamp):
    shutil.rmtree(home, ignore_errors=True)
    steps = [
        [base_python(), "-m", "venv", str(home)],
        [str(home / "bin" / "python"), "-m", "pip", "install", "--quiet"]
        + ["--disable-pip-version-check", f"uv=={UV_VERSION}"],
    ]
    for command in steps:
        process = run(command)
        if process.returncode != 0:
            last = (process.stderr or process.stdout).strip().splitlines()
            say(
                f"uv {UV_VERSION} could not be installed "
                f"({last[-1] if last else 'no output'}); using pip instead"
            )
            shutil.rmtree(home, ignore_errors=True)
            return None
    stamp.write_text(json.dumps({"uv": UV_VERSION}) + "\n")
    return uv


def install(venv, requirement_args, uv):
    """Create ``venv`` with this interpreter and install into it."""
    python = venv / "bin" / "python"
    if uv is not None:
        steps = [
            [str(uv), "venv", "--quiet", "--python", base_python(), str(venv)],
            [str(uv), "pip", "install", "--quiet", "--compile-bytecode"]
            + ["--python", str(python), *requirement_args],
        ]
    else:
        steps = [
            [base_python(), "-m", "venv", str(venv)],
            [str(python), "-m", "pip", "install", "--quiet"]
            + ["--disable-pip-version-check", *requirement_args],
        ]
    for command in steps:
        process = subprocess.run(command, text=True, stderr=subprocess.PIPE)
        if process.returncode != 0:
            return process.stderr
    return None


def base_python():
    """The interpreter behind this one, even when it runs inside a venv."""
    return getattr(sys, "_base_executable", None) or sys.executable


def same_python(first, second):
    return bool(first and second) and os.path.realpath(first) == os.path.realpath(
        second
    )


def stamp_for(requirements_text):
    return {
        "requirements_sha256": hashlib.sha256(requirements_text.encode()).hexdigest(),
        "python": base_python(),
        "python_version": python_version_text(),
        # Environments made before their bytecode was compiled are made again.
        "bytecode": True,
    }


def is_complete(venv, expected):
    stamp = venv / STAMP
    try:
        found = json.loads(stamp.read_text())
    except (OSError, ValueError):
        return False
    same = all(
        same_python(found.get(key), value)
        if key == "python"
        else found.get(key) == value
        for key, value in expected.items()
    )
    return same and (venv / "bin" / "python").exists()


def ensure(venv, requirements_text, requirement_args, label):
    """Make ``venv`` hold exactly these requirements, or stop with one line.

    Two processes asking for the same environment at once (two clones, or a
    build and a test run) take turns: the second finds it complete.
    """
    check_python()
    venv = Path(venv)
    expected = stamp_for(requirements_text)
    if is_complete(venv, expected):
        return venv
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f".{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if is_complete(venv, expected):
            return venv
        return _build(venv, expected, requirement_args, label)


def _build(venv, expected, requirement_args, label):
    if venv.exists():
        say(f"{venv} is incomplete or was made otherwise; building it again")
        shutil.rmtree(venv)
    check_disk(venv.parent)
    uv = uv_executable()
    installer = f"uv {UV_VERSION}" if uv else "pip"
    say(f"installing {label} into {venv} with {installer}")
    start = time.perf_counter()
    error = install(venv, requirement_args, uv)
    if error is not None:
        shutil.rmtree(venv, ignore_errors=True)
        unreachable = registry_unreachable()
        if unreachable:
            stop(f"{unreachable}; the environment was not created.")
        lines = [line for line in error.strip().splitlines() if line.strip()]
        stop(
            f"installing {label} with {installer} failed: "
            f"{lines[-1] if lines else 'no message'}"
        )
    seconds = time.perf_counter() - start
    (venv / STAMP).write_text(
        json.dumps({**expected, "installer": installer, "seconds": seconds}) + "\n"
    )
    say(f"{label} ready in {seconds:.0f} s ({installer})")
    return venv


# -- The site's environment --------------------------------------------------------


def site(venv):
    files = [REPO / "requirements.txt", REPO / "constraints.txt"]
    text = "".join(path.read_text() for path in files)
    args = ["-r", str(files[0]), "-c", str(files[1])]
    ensure(venv, text, args, "the site's requirements")
    install_checker(venv)


# -- The checker, installed from this checkout ---------------------------------

CHECKER_STAMP = ".operator-checker-digest"


def install_checker(venv):
    """Install ``operator_checker/`` (its wheel, built from this checkout) into
    ``venv`` unless the same files are installed there already: every clone
    sharing the environment gets its own checkout's package, and an unchanged
    one costs a hash. The pages, the tests and the matrix import it from
    there."""
    venv = Path(venv)
    wanted = checker.digest()
    stamp = venv / CHECKER_STAMP
    if stamp.is_file() and stamp.read_text().strip() == wanted:
        return
    with open(venv.parent / f".{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.is_file() and stamp.read_text().strip() == wanted:
            return
        python = venv / "bin" / "python"
        try:
            wheel = checker.cached_wheel(python)
        except RuntimeError as error:
            stop(f"{error} (in {venv})")
        options = ["--no-deps", "--reinstall", str(wheel)]
        uv = uv_executable()
        if uv is not None:
            command = [str(uv), "pip", "install", "--quiet", "--python", str(python)]
        else:
            command = [str(python), "-m", "pip", "install", "--quiet"]
        process = subprocess.run(command + options, text=True, stderr=subprocess.PIPE)
        if process.returncode != 0:
            lines = process.stderr.strip().splitlines() or ["no message"]
            stop(f"installing operator_checker into {venv} failed: {lines[-1]}")
        stamp.write_text(wanted + "\n")


# -- The version matrix's environments ---------------------------------------------


def requirement_name(line):
    return re.split(r"[=<>!~\[ ]", line.strip())[0].lower()


def page_requirements(overridden=()):
    """What the pages import besides torch: the examples' pins in requirements.txt.

    A package a release pins itself (``with``) keeps that release's pin.
    """
    pins = []
    for line in (REPO / "requirements.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        name = requirement_name(line)
        if name in load_matrix()["pages"]["packages"] and name not in overridden:
            pins.append(line)
    return pins


def load_matrix():
    return layout.load_matrix(REPO)


def releases():
    """The supported releases, oldest first."""
    return load_matrix()["releases"]


def all_releases():
    """Every release the matrix runs: the one below the supported ones first."""
    matrix = load_matrix()
    return matrix.get("below", []) + matrix["releases"]


def release_requirements(release):
    extra = release.get("with", [])
    overridden = {requirement_name(line) for line in extra}
    return [f"torch=={release['torch']}", *extra, *page_requirements(overridden)]


def matrix_venv(release):
    requirements = "\n".join(release_requirements(release))
    key = hashlib.sha256(requirements.encode()).hexdigest()[:12]
    return cache_home() / "matrix" / f"torch-{release['torch']}-{key}", requirements


def release_caches(version):
    """The compiler caches a release's runs share (inductor's and the C++
    extensions'), as the variables that point torch at them: kept apart from
    the site's, since what one release compiled does not load in another."""
    caches = cache_home() / "matrix" / f"caches-{version}"
    return {
        "TORCHINDUCTOR_CACHE_DIR": str(caches / "inductor"),
        "TORCH_EXTENSIONS_DIR": str(caches / "extensions"),
    }


def release_names(selected=()):
    """The versions of every release the matrix runs, oldest first (the one
    below the supported ones included), or of those ``selected``."""
    names = [release["torch"] for release in all_releases()]
    unknown = set(selected) - set(names)
    if unknown:
        stop(f"not in {MATRIX_FILE.name}: {', '.join(sorted(unknown))}")
    return [name for name in names if not selected or name in selected]


def tools(venv, requirements_file):
    """An environment holding exactly the pinned tools of ``requirements_file``
    (``tools/lint-requirements.txt``): a separate one, so that the linters'
    pins never change the site environment's hash."""
    text = Path(requirements_file).read_text()
    ensure(venv, text, ["-r", str(requirements_file)], Path(requirements_file).name)


def prune(keep_venv):
    """Delete the matrix's environments for other requirements, and old site
    environments, then let uv drop what no environment links to any more."""
    keep = {Path(keep_venv).resolve()}
    keep |= {matrix_venv(release)[0].resolve() for release in all_releases()}
    home = cache_home()
    candidates = list(home.glob("venv-*")) + list((home / "matrix").glob("torch-*"))
    for venv in sorted(candidates):
        if venv.is_dir() and venv.resolve() not in keep:
            say(f"removing {venv}")
            shutil.rmtree(venv)
    uv = uv_executable()
    if uv is not None:
        subprocess.run([str(uv), "cache", "prune"], check=False)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    site_parser = sub.add_parser("site")
    site_parser.add_argument("--venv", required=True, type=Path)
    releases_parser = sub.add_parser("releases")
    releases_parser.add_argument("--json", action="store_true")
    releases_parser.add_argument("releases", nargs="*")
    tools_parser = sub.add_parser("tools")
    tools_parser.add_argument("--venv", required=True, type=Path)
    tools_parser.add_argument("--requirements", required=True, type=Path)
    prune_parser = sub.add_parser("prune")
    prune_parser.add_argument("--keep-venv", required=True, type=Path)
    args = parser.parse_args()
    if args.command == "site":
        site(args.venv)
    elif args.command == "releases":
        names = release_names(args.releases)
        print(json.dumps(names) if args.json else "\n".join(names))
    elif args.command == "tools":
        tools(args.venv, args.requirements)
    else:
        prune(args.keep_venv)


if __name__ == "__main__":
    main()
