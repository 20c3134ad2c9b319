"""The site's layout, defined once: its editions, where their catalogs are,
where the version matrix and its records live, and the project's files.

The extensions, the tools, the tests and the ``Makefile`` (``python -c``)
read these names instead of spelling the paths again. Standard library only:
``tools/envs.py`` imports it under whatever interpreter ``make`` was given.
"""

import functools
import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def cache_home():
    """What every clone on the machine shares: environments, compiler caches,
    the checker's wheels (the ``Makefile``'s ``CACHE_HOME``, this folder)."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "pytorch-custom-ops-site"


# -- Editions -----------------------------------------------------------------

SOURCE_LANGUAGE = "en"
# language -> (name shown in the switcher, folder under the site's root,
# BCP 47 tag for hreflang); the source language first.
EDITIONS = {
    "en": ("English", "", "en"),
    "zh_CN": ("简体中文", "zh_CN/", "zh-Hans"),
}
# The translated editions, each built with ``-D language=<it>``.
TRANSLATIONS = tuple(language for language in EDITIONS if language != SOURCE_LANGUAGE)
# The catalog of the extensions' own strings (the stamp, the card footers).
SITE_CATALOG = "site"
EXTENSION_LOCALE = REPO / "_ext" / "locale"


def is_translation(language):
    """Whether a build in ``language`` (``config.language``) is a translation."""
    return bool(language) and language != SOURCE_LANGUAGE


def catalogs(srcdir, language):
    """``locale/<language>/LC_MESSAGES``: the pages' catalogs in ``language``."""
    return Path(srcdir) / "locale" / str(language) / "LC_MESSAGES"


def catalog_path(srcdir, language, docname):
    """``locale/<language>/LC_MESSAGES/<docname>.po``: one document's catalog."""
    return catalogs(srcdir, language) / f"{docname}.po"


def site_catalog_path(language):
    """The catalog of the extensions' own strings in ``language``."""
    return EXTENSION_LOCALE / str(language) / "LC_MESSAGES" / f"{SITE_CATALOG}.po"


def translated_downloads(srcdir, language):
    """``tutorials_<language>/``: the translated scripts, notebooks and zip
    files, written by ``translated_downloads`` before the edition is read and
    read by ``translated_gallery`` for the thumbnails."""
    return Path(srcdir) / f"tutorials_{language}"


# -- The order of the extensions' work before a build reads anything -------------

# ``builder-inited`` priorities: each step reads what the one before wrote.
# Pages without a valid run record lose their ``.md5`` (verified_stamp), so
# that Sphinx-Gallery, at its default priority, runs them when it generates
# the gallery; then every notebook is written again (notebooks), then the
# translated edition's scripts, notebooks and zip files (translated_downloads),
# from the English gallery's output.
FORCE_RUNS_PRIORITY = 400
SPHINX_GALLERY_PRIORITY = 500
NOTEBOOKS_PRIORITY = 600
TRANSLATED_DOWNLOADS_PRIORITY = 700


# -- The version matrix ---------------------------------------------------------

MATRIX = Path("versions") / "matrix.toml"
RECORDS = Path("versions") / "records"


def load_matrix(root=REPO):
    """``versions/matrix.toml`` of the project at ``root``, parsed once per
    version of the file."""
    path = Path(root) / MATRIX
    return _parsed(path, path.stat().st_mtime_ns)


@functools.lru_cache(maxsize=8)
def _parsed(path, _mtime):
    import tomllib  # Python 3.11; imported late so older ones reach check_python

    return tomllib.loads(path.read_text())


def minor(version):
    """'2.7.1+cu126' -> '2.7'."""
    return ".".join(version.split("+")[0].split(".")[:2])


def release_key(version):
    """'2.10.0+cu128' -> (2, 10, 0): releases in numeric order."""
    return tuple(int(part) for part in version.split("+")[0].split(".")[:3])


# -- The project's files ----------------------------------------------------------


def project_files(root=REPO):
    """The files of the checkout that git tracks or would track (untracked
    files not ignored included), relative to ``root``."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=root,
        check=True,
        capture_output=True,
    ).stdout.decode()
    return [
        name for name in listed.split("\0") if name and (Path(root) / name).is_file()
    ]
