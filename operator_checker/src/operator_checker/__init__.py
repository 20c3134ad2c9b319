"""operator_checker: every check of the PyTorch custom operators course on
one operator, in one call.

Give ``check_operator`` an operator and one sample of its arguments. It
derives the inputs a caller may really pass (other memory layouts, empty
tensors, other precisions, with and without gradients, every device), runs
``opcheck``'s tests, ``gradcheck``, forward-mode AD, ``vmap``,
``torch.compile`` and ``torch.export`` on each, and returns a ``Report``
whose rows say what is a bug (``failed``), what is a limitation of the
operator, what does not apply, and what you declared not to check.

From the shell: ``python -m operator_checker --help``. In pytest:
``operator_checker.pytest``. The modules:

* ``operator_checker.samples``: ``Sample``, ``capture_samples``,
  ``save_samples``, ``load_samples``;
* ``operator_checker.variants``: the inputs derived from a sample;
* ``operator_checker.checks``: each check;
* ``operator_checker.report``: rows, outcomes, causes and fixes, and the
  reports for machines (JSON and its schema, Markdown, GitHub, JUnit);
* ``operator_checker.config``: ``[tool.operator_checker]`` in pyproject.toml;
* ``operator_checker.cli``: the command;
* ``operator_checker.core``: ``check_operator``;
* ``operator_checker.isolation``: the child process of an isolated run;
* ``operator_checker.targets``: operators by name.

Importing this package imports no torch until a name below is used, so the
command starts at once and its parent process never loads the operator.
"""

import importlib

from operator_checker import options as _options  # imports no torch

# The version, in this one place (pyproject.toml reads it): semantic
# versioning, with CHANGELOG.md saying what changed for users.
__version__ = "1.1.0"
# The oldest PyTorch release the package is tested with.
TORCH_FLOOR = (2, 7)

#: The checks, in the order a report lists them. ``eager`` holds what the
#: plain calls that make the variants found (a refused or crashing variant),
#: ``gradients`` the arguments a backward does not reach; the others are
#: checks that ``only=`` and ``skip=`` may name.
CHECKS = _options.CHECKS
#: The outcomes a row can have, from the worst to the best, are ``failed``,
#: ``limitation``, ``not applicable``, ``skipped`` and ``passed``.
OUTCOMES = _options.OUTCOMES
#: The fast checks that ``quick=True`` (``--quick``) runs on the samples as
#: given: ``opcheck``'s four tests and ``vmap``, for a pre-commit hook.
QUICK_CHECKS = _options.QUICK_CHECKS

_PUBLIC = {
    "check_operator": "api",
    "ExitCode": "cli",
    "Sample": "samples",
    "capture_samples": "samples",
    "save_samples": "samples",
    "load_samples": "samples",
    "Report": "report",
    "Row": "report",
    "DTYPES": "variants",
    "LAYOUTS": "variants",
    "TargetError": "targets",
    "json_schema": "report",
}
__all__ = ["CHECKS", "OUTCOMES", "QUICK_CHECKS", "TORCH_FLOOR", "__version__", *_PUBLIC]


def __getattr__(name):
    if name in _PUBLIC:
        module = importlib.import_module(f"operator_checker.{_PUBLIC[name]}")
        return getattr(module, name)
    raise AttributeError(f"module 'operator_checker' has no attribute {name!r}")


def __dir__():
    return sorted(__all__)
