"""Helpers that know what a tutorial page is; no Sphinx extension lives here.

``contract``  what a page must look like, and its code's identity
``records``   what the version matrix measured for each page
``course``    the order of the pages and their one-line summaries (course.toml)
``pagelint``  every piece a page needs besides its script, and what is missing

The Sphinx extensions in ``_ext/``, the tools in ``tools/`` and the tests
import these; nothing here imports from ``_ext/`` or ``tools/``.
"""
