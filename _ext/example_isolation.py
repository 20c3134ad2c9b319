"""Give every example a clean compiler state when the gallery runs them.

Sphinx-Gallery runs all examples in the same process (or a few worker
processes), so state one page leaves behind could change what the next page
prints: compiled graphs cached by ``torch.compile`` and their recompilation
counters above all. ``reset_torch`` runs before each example (it is listed in
``reset_modules``) and clears that state with ``torch.compiler.reset()``.

It does not make a worker a fresh interpreter: modules stay imported and
operators registered by earlier pages stay registered, which is why every page
uses an operator namespace of its own. The standalone runs of the tests
(``python advanced/<name>.py``) are the check that each page needs nothing
another page left behind.
"""

import logging
import sys


def reset_torch(gallery_conf, fname):
    torch = sys.modules.get("torch")
    if torch is None:
        return
    torch.compiler.reset()
    # torch.utils.cpp_extension logs "No CUDA runtime is found" whenever nvcc is
    # installed on a machine without a GPU, as on our build machines. It says
    # nothing about the page, so keep it out of the rendered output.
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
