"""The course's operator checker as a package: ``operator_checker/``.

One place for what the environments, the build and the tests need to know of
it: its version and wheel's name (from its ``__init__.py``), the digest of
its files (an environment or a served wheel is made again when it changes),
and how its wheel is built (from a copy of the folder, so that setuptools'
``build/`` and ``egg-info`` never land in the checkout).
"""

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from pagelib import layout

ROOT = Path(__file__).resolve().parent.parent / "operator_checker"
# Where the site serves the wheel, under each edition's root.
SERVED = "wheels"
# Its distribution's name, as pip and importlib.metadata know it.
DISTRIBUTION = "operator-checker"


def version():
    """The package's version: ``__version__`` in its ``__init__.py``, the one
    place its ``pyproject.toml`` reads it from."""
    import re

    text = (ROOT / "src" / "operator_checker" / "__init__.py").read_text()
    return re.search(r'^__version__ = "([^"]+)"', text, re.M).group(1)


def wheel_name():
    return f"operator_checker-{version()}-py3-none-any.whl"


def files():
    """The files the package is built from."""
    return [
        ROOT / "pyproject.toml",
        ROOT / "README.md",
        ROOT / "CHANGELOG.md",
        ROOT / "CONTRIBUTING.md",
        *sorted(p for p in (ROOT / "src").rglob("*") if p.is_file() and _kept(p)),
    ]


def _kept(path):
    return "__pycache__" not in path.parts and ".egg-info" not in str(path)


def digest():
    """The identity of the package's files in this checkout."""
    found = hashlib.sha256()
    for path in files():
        found.update(str(path.relative_to(ROOT)).encode() + b"\0")
        found.update(path.read_bytes() + b"\0")
    return found.hexdigest()


def cached_wheel(python):
    """This checkout's wheel, built with ``python`` once per content of the
    package (``digest()``) into the machine's cache, shared by the site's
    builds, both editions, the environments and the scratch copies of the
    tests; RuntimeError as ``build_wheel`` says."""
    folder = layout.cache_home() / "checker-wheels" / digest()[:16]
    wheel = folder / wheel_name()
    if wheel.is_file():
        return wheel
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="building-", dir=folder) as scratch:
        built = build_wheel(python, scratch)
        os.replace(built, wheel)  # whole or absent, for a build beside this one
    return wheel


def build_wheel(python, outdir):
    """Build the wheel with ``python`` (which has ``build`` and setuptools)
    into ``outdir``; its path, or RuntimeError with the builder's last line."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="operator-checker-build-") as folder:
        copy = Path(folder) / "operator_checker"
        for path in files():
            target = copy / path.relative_to(ROOT)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
        command = [str(python), "-m", "build", "--wheel", "--no-isolation"]
        process = subprocess.run(
            [*command, "--outdir", str(outdir), str(copy)],
            capture_output=True,
            text=True,
        )
    wheel = outdir / wheel_name()
    if process.returncode != 0 or not wheel.is_file():
        lines = (process.stderr or process.stdout).strip().splitlines() or ["?"]
        raise RuntimeError(f"building the operator_checker wheel failed: {lines[-1]}")
    return wheel
