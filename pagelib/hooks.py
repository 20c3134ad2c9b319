"""The functions Sphinx-Gallery calls by name (``conf.py`` lists them).

``reset_torch`` and ``record_execution`` are ``reset_modules`` entries: they
run before each example, in the worker processes too. ``CourseOrder`` is the
``within_subsection_order`` key (``course.CourseOrder``).

Sphinx-Gallery runs all examples in the same process (or a few worker
processes), so state one page leaves behind could change what the next page
prints: compiled graphs cached by ``torch.compile`` and their recompilation
counters above all. ``reset_torch`` clears that state. It does not make a
worker a fresh interpreter: modules stay imported and operators registered by
earlier pages stay registered, which is why every page uses an operator
namespace of its own. The standalone runs of the tests
(``python advanced/<name>.py``) are the check that each page needs nothing
another page left behind.
"""

import contextlib
import io
import logging
import sys

from pagelib import gallery, run_record
from pagelib.course import CourseOrder

__all__ = ["CourseOrder", "record_execution", "reset_torch"]


def reset_torch(gallery_conf, fname):
    quietly_import_cpp_extension()
    # Nothing was compiled before torch._dynamo was imported, and importing
    # it only to reset it costs seconds in a build that runs one page.
    if "torch._dynamo" in sys.modules:
        sys.modules["torch"].compiler.reset()


def quietly_import_cpp_extension():
    """Import ``torch.utils.cpp_extension`` once, without its CUDA notice.

    Where CUDA's compiler is installed but no GPU is visible (our build
    machines), importing it logs "No CUDA runtime is found" (PyTorch 2.7
    prints it). Inductor imports it as soon as a page compiles, so the notice
    would land in whichever page does so first in a worker, saying nothing
    about that page. Importing it here, before the page runs, keeps it out; a
    page that teaches the notice (choosing_a_mechanism) sees the module
    already imported, as in any process where something imported it first.
    """
    if "torch.utils.cpp_extension" in sys.modules:
        return
    logger = logging.getLogger("torch.utils.cpp_extension")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            import torch.utils.cpp_extension  # noqa: F401
    finally:
        logger.setLevel(level)


def record_execution(gallery_conf, fname):
    """Write the record of the run of ``fname`` that is about to start
    (``fname`` is None when Sphinx-Gallery enters a folder of examples)."""
    source, folder = gallery.locate(gallery_conf, fname) if fname else (None, None)
    if source is not None:
        run_record.write(source, folder)
