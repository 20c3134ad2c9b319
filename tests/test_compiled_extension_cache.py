"""A rebuild of the C++ page with no C++ change reuses the compiled library.

The first, cold build runs in a process that imported ``cpp_extension``
before the page set ``CUDA_HOME``, as the site's build (whose hook imports it
before every page) and a reused notebook kernel do: the page must still
build with the toolkit it chose.

Where ccache is installed, the cold build compiles through it
(``helpers.through_ccache``): what is tested is the page's cache, not the
compiler, and the build from an empty folder took 70 CPU seconds of g++ and
nvcc, 16 with ccache warm. ninja and the page's cache run as a reader's do.
"""

import re
import shutil
import sys

import pytest

from tests.support.helpers import REPO, run, through_ccache


@pytest.mark.skipif(shutil.which("c++") is None, reason="no C++ compiler")
def test_cpp_page_compiles_once_then_reuses_its_build(tmp_path):
    script = REPO / "advanced" / "cpp_custom_ops.py"
    cache = {"TORCH_EXTENSIONS_DIR": str(tmp_path / "extensions")}
    cache |= through_ccache(tmp_path)
    imported_first = (
        "import runpy, sys; import torch.utils.cpp_extension; "
        "runpy.run_path(sys.argv[1], run_name='__main__')"
    )
    first = run(
        [sys.executable, "-c", imported_first, str(script)],
        cwd=tmp_path,
        env=cache,
        timeout=900,
    )
    assert first.returncode == 0, first.stderr[-3000:]
    second = run([sys.executable, str(script)], cwd=tmp_path, env=cache, timeout=900)
    assert second.returncode == 0, second.stderr[-3000:]

    assert re.search(r"^compiled the extension in", first.stdout, re.M)
    assert re.search(r"^reused the cached build in", second.stdout, re.M)
    libraries = list((tmp_path / "extensions").rglob("*.so"))
    assert libraries, "the build did not land in TORCH_EXTENSIONS_DIR"
