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

import logging
import sys

from pagelib import gallery, run_record
from pagelib.course import CourseOrder

__all__ = ["CourseOrder", "record_execution", "reset_torch"]


def reset_torch(gallery_conf, fname):
    # torch.utils.cpp_extension logs "No CUDA runtime is found" whenever nvcc is
    # installed on a machine without a GPU, as on our build machines, as soon
    # as a page imports it. It says nothing about the page, so keep it out of
    # the rendered output; set before torch is imported, it holds from the start.
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.compiler.reset()


def record_execution(gallery_conf, fname):
    """Write the record of the run of ``fname`` that is about to start
    (``fname`` is None when Sphinx-Gallery enters a folder of examples)."""
    source, folder = gallery.locate(gallery_conf, fname) if fname else (None, None)
    if source is not None:
        run_record.write(source, folder)
