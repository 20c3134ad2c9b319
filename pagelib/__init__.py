"""Helpers that know what a tutorial page is; no Sphinx extension lives here.

``layout``       the site's editions, catalog paths, matrix file and the order
                 of the extensions' work: its layout, defined once
``contract``     what a page must look like, and its code's identity
``records``      what the version matrix measured for each page (``Record``)
``run_record``   the record of the run that produced a page's output
``course``       the pages: their order and settings, one table each (course.toml)
``pagelint``     every piece a page needs besides its script, and what is missing
``gallery``      where the examples are, from Sphinx-Gallery's settings
``hooks``        what Sphinx-Gallery calls around each example
``markdown``     reST prose to a notebook's Markdown
``translation``  a page's catalog, and a script with its prose translated
``wording``      lists, devices, sentences and floors in the build's language
``checker``      the course's checker package: its version, wheel and digest
``api_names``    the torch API names the pages' code uses, and their entries
``thumbnails``   the gallery's cards (title, summary) in a translated edition

The Sphinx extensions in ``_ext/``, the tools in ``tools/`` and the tests
import these; nothing here imports from ``_ext/`` or ``tools/``.
"""
