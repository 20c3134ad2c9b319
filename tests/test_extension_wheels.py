"""The wheels the shipping pages build install and run where the pages say.

``cpp_extension_packaging.py`` and ``cpp_stable_abi.py`` build wheels into
``$TORCH_EXTENSIONS_DIR/wheels``, the cache ``make`` shares between the site's
build and the pages' later runs. These tests take the wheels the pages left
there, and check the pages' claims from outside: the downloaded notebook's
run after the build reuses the wheels; pip accepts each wheel on the Python versions the
packaging page says; the stable-ABI wheel, built with the pinned PyTorch, runs
under the older releases of the version matrix from the page's floor on and
fails to load below it; and the wheel built against ATen's C++ API carries no
such promise. Other releases' environments come from ``tools/envs.py``.
"""

import os
import re
import sys
from pathlib import Path

import envs
import matrix
import pytest

from pagelib import contract
from tests.support.helpers import (
    GALLERY_DIR,
    REPO,
    WHEEL_PAGES,
    printed,
    release_python,
    run,
)

PAGES = WHEEL_PAGES  # their notebooks run on the pinned release, after the build
PINNED = envs.releases()[-1]["torch"]


@pytest.fixture(scope="module")
def built(site, executed_notebooks):
    """The wheels' folder, and each page's output in the build and in its
    downloaded notebook's run after the build."""
    cache = Path(os.environ["TORCH_EXTENSIONS_DIR"])
    outputs = {}
    for name in PAGES:
        notebook, error, version = executed_notebooks[name]
        assert error is None, str(error)[-4000:]
        assert version.split("+")[0] == PINNED, version
        built_page = (REPO / GALLERY_DIR / f"{name}.rst").read_text()
        outputs[name] = (built_page, printed(notebook))
    return cache, outputs


def the_wheel(cache, label):
    """The wheel this build's pages made for ``label``.

    The pages keep each wheel in a folder named after a hash of its inputs.
    ``make`` gives every environment a cache of its own, so other folders
    for the label come only from earlier versions of the page: the newest
    folder is this version's.
    """
    folders = [f for f in (cache / "wheels").glob(f"{label}-*") if f.is_dir()]
    assert folders, f"no {label} wheel under {cache}"
    newest = max(folders, key=lambda folder: folder.stat().st_mtime)
    (wheel,) = newest.glob("*.whl")
    return wheel


def floor_of(page):
    """(major, minor) of the page's floor: ``matrix.release_key`` of a release
    from it on compares greater or equal ((2, 10, 0) >= (2, 10))."""
    text = (REPO / "advanced" / f"{page}.py").read_text()
    major, minor = contract.declared_floors(text)[0].split(".")
    return int(major), int(minor)


def install(python, wheel, folder):
    command = [str(python), "-m", "pip", "install", "--no-deps", "--no-index"]
    process = run(command + ["--quiet", "--target", str(folder), str(wheel)])
    assert process.returncode == 0, process.stderr[-2000:]
    return folder


# Imports the stable-ABI package and checks it against a reference, the
# dispatcher path (decay=1 is aten::cumsum) and opcheck.
CHECK_STABLE = """
import torch

import stable_ops


def reference(x, decay, reverse=False):
    out, running = torch.empty_like(x), torch.zeros_like(x[..., 0])
    positions = range(x.shape[-1])
    for t in reversed(positions) if reverse else positions:
        running = decay * running + x[..., t]
        out[..., t] = running
    return out


x = torch.randn(4, 3, 20, dtype=torch.float64)
scan = stable_ops.discounted_cumsum
torch.testing.assert_close(scan(x, 0.7, True), reference(x, 0.7, True))
torch.testing.assert_close(scan(x, 1.0), torch.cumsum(x, -1))
op = torch.ops.stable_ops.discounted_cumsum.default
torch.library.opcheck(op, (torch.randn(5, 6).t(), 0.9))
print("stable_ops works under torch", torch.__version__)
"""

LOAD_LIBRARY = """
import sys
from pathlib import Path

import torch

(library,) = Path(sys.argv[1]).glob("*/_C*.so")
torch.ops.load_library(str(library))
print("loaded under torch", torch.__version__)
"""


def test_pages_build_their_wheels_once_then_reuse_them(built):
    _, outputs = built
    for name in PAGES:
        in_build, standalone = outputs[name]
        # The build built the wheel, or reused one an earlier build left.
        assert re.search(r"(built the|reused the cached) wheel in", in_build), name
        assert "built the wheel" not in standalone, name
        assert re.search(r"reused the cached wheel in", standalone), name


@pytest.mark.parametrize("minor", range(9, 15))
def test_pip_accepts_each_wheel_on_the_pythons_the_page_names(built, tmp_path, minor):
    cache, _ = built
    expected = {"per-python": minor == sys.version_info[1], "abi3": minor >= 10}
    for label, accepted in expected.items():
        command = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index"]
        command += ["--target", str(tmp_path / label), "--implementation", "cp"]
        command += ["--python-version", f"3.{minor}", "--only-binary=:all:"]
        process = run(command + [str(the_wheel(cache, label))])
        assert (process.returncode == 0) == accepted, (label, process.stderr[-1000:])


@pytest.fixture(scope="module")
def stable_site(built, tmp_path_factory):
    """The stable-ABI wheel, installed once: the files pip unpacks are the
    same whichever release's pip unpacks them, and every release loads them."""
    cache, _ = built
    folder = tmp_path_factory.mktemp("stable-site")
    return install(sys.executable, the_wheel(cache, "stable"), folder)


@pytest.mark.parametrize("release", [r["torch"] for r in envs.releases()[:-1]])
def test_stable_wheel_loads_from_the_page_floor_on_and_not_below(
    stable_site, tmp_path, release
):
    floor = floor_of("cpp_stable_abi")
    assert floor < matrix.release_key(PINNED)[:2], "the floor is the pinned release"
    python = release_python(release)
    process = run(
        [str(python), "-c", CHECK_STABLE],
        cwd=tmp_path,
        env={"PYTHONPATH": str(stable_site)},
    )
    if matrix.release_key(release) >= floor:
        assert process.returncode == 0, process.stderr[-3000:]
        assert f"stable_ops works under torch {release}" in process.stdout
    else:
        # Below the floor, the loader misses one of the C functions that the
        # floor release introduced (their names start with torch_).
        assert process.returncode != 0
        missing = re.search(r"undefined symbol: (torch_\w+)", process.stderr)
        assert missing, process.stderr[-3000:]


def test_aten_wheel_fails_to_load_under_another_release(built, tmp_path):
    # The stable-ABI page says a wheel built against ATen's C++ API is tied
    # to its release; the oldest release of the matrix shows it.
    cache, _ = built
    oldest = envs.releases()[0]
    python = release_python(oldest["torch"])
    site = install(python, the_wheel(cache, "per-python"), tmp_path / "site")
    process = run([str(python), "-c", LOAD_LIBRARY, str(site)], cwd=tmp_path)
    assert process.returncode != 0
    assert "undefined symbol" in process.stderr, process.stderr[-3000:]
    # The same wheel loads under the release it was built with.
    process = run([sys.executable, "-c", LOAD_LIBRARY, str(site)], cwd=tmp_path)
    assert process.returncode == 0, process.stderr[-3000:]
    assert f"loaded under torch {PINNED}" in process.stdout


def test_the_pages_wheels_are_the_ones_tested(built):
    cache, outputs = built
    for label, page in [
        ("per-python", "cpp_extension_packaging"),
        ("abi3", "cpp_extension_packaging"),
        ("stable", "cpp_stable_abi"),
    ]:
        assert the_wheel(cache, label).name in outputs[page][1], (label, page)
    assert "-cp310-abi3-" in the_wheel(cache, "stable").name
