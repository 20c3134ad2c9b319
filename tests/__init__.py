"""The test suite, a package imported from the repository's root (pyproject's
``pythonpath`` also puts ``_ext/`` and ``tools/`` on the path, as the build
and make do).

* ``unit/``: the fast lane (`make unit`, part of `make check`): one module per
  module it tests, named after it (``test_matrix.py`` for ``tools/matrix.py``,
  ``test_notebooks.py`` for ``_ext/notebooks.py``); the few that test
  something else (``test_pages.py``: the rules every page of ``advanced/``
  follows that need no build) are listed with why in ``unit/test_layout.py``,
  which fails on any other name. Its own ``conftest.py`` holds its fixtures (a
  small version matrix, a Sphinx build in this process, the Chinese catalog).
* ``test_*.py`` here: what needs the site's build, a scratch build or a run of
  a page (`make test`). ``conftest.py`` holds their fixtures and hooks.
  ``test_api_reference.py`` runs no page but is here all the same: each of
  its builds is of a scratch copy of the whole project (every extension,
  torch's docstrings through autodoc), in a fresh ``python -m sphinx`` with
  an environment of its own (``REPOSITORY_URL``), which the fast lane's
  in-process ``sphinx_build`` does not give.
* ``support/``: what the tests share and are not tests (``helpers``,
  ``pages``, ``survey_plan``, ``workflow_rehearsal``), so that this folder
  lists tests; ``unit/test_layout.py`` refuses any other module here.
* ``browser/``: the scripts ``test_browser.py`` runs in the page.
"""
