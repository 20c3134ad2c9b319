"""The test suite, a package imported from the repository's root (pyproject's
``pythonpath`` also puts ``_ext/`` and ``tools/`` on the path, as the build
and make do).

* ``unit/``: the fast lane (`make unit`, part of `make check`): one module per
  module it tests (``test_matrix.py`` for ``tools/matrix.py``,
  ``test_notebooks.py`` for ``_ext/notebooks.py``), plus ``test_pages.py``,
  the rules every page of ``advanced/`` must follow that need no build. Its
  own ``conftest.py`` holds its fixtures (a small version matrix, a Sphinx
  build in this process, the Chinese catalog).
* ``test_*.py`` here: what needs the site's build, a scratch build or a run of
  a page (`make test`). ``conftest.py`` holds their fixtures and hooks.
* ``pages.py``: a page as the template prescribes and its version records,
  for both lanes; ``helpers.py``: what the slow tests share (running make, a
  scratch copy of the project, reading a built page).
* ``browser/``: the scripts ``test_browser.py`` runs in the page.
"""
