"""Sphinx configuration for the PyTorch custom operators tutorials."""

import os
import shutil
import sys
from datetime import date
from pathlib import Path

HERE = Path(__file__).parent.resolve()
# Build logic lives in small extensions under _ext/, one concern per module.
# _ext/ holds the Sphinx extensions; pagelib/ the helpers they share with the
# tools and the tests.
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(HERE))

# -- Project -----------------------------------------------------------------

project = "PyTorch Custom Operators"
author = "The custom operators tutorial authors"
copyright = f"{date.today().year}, {author}"

# -- General -----------------------------------------------------------------

extensions = [
    "sphinx_gallery.gen_gallery",
    "sphinx_design",
    "sphinx_copybutton",
    # Reader experience: the landing page's cards, the verified stamp on each
    # tutorial, and pages that fetch nothing from other hosts.
    "tutorial_cards",
    "verified_stamp",
    "offline_pages",
    # Notebooks that read as well as the pages, written again after
    # Sphinx-Gallery's (see _ext/notebooks.py).
    "notebooks",
    # The course's checker, a package served as a wheel (see _ext/checker_wheel.py).
    "checker_wheel",
    # The per-release table of PyTorch's sharp edges (see _ext/sharp_edges.py).
    "sharp_edges",
    # The Chinese edition (see _ext/editions.py): links between the editions
    # and Chinese search; our strings' catalog and the site's name; what
    # Sphinx-Gallery writes outside gettext's reach; translated downloads.
    "editions",
    "site_catalog",
    "translated_gallery",
    "translated_downloads",
    # Sphinx's cache of this configuration as written here, so that a build
    # with nothing to do reports no change (see _ext/config_as_read.py).
    "config_as_read",
    # The torch API the pages use, documented from the installed torch and
    # linked from the pages' code (see _ext/api_reference.py).
    "api_reference",
    # "Open in Colab" on every tutorial when the repository's address is
    # known (see _ext/colab_links.py).
    "colab_links",
]

# -- Editions -----------------------------------------------------------------

# The site is written in English; `make html` also builds the 简体中文 edition
# (-D language=zh_CN) from the catalogs in locale/, one catalog per page.
language = "en"
locale_dirs = ["locale/"]
gettext_compact = False
# Source locations point into the generated gallery and change with every
# edit; message order is kept stable without them.
gettext_location = False
gettext_uuid = False

# What Sphinx reads, by inclusion: the three top-level pages, the gallery
# Sphinx-Gallery generates from advanced/ (with its computation times) and the
# API reference's entries. Nothing else in the repository is the site's, so a
# new .rst or .md elsewhere (the contributor's guide in docs/dev/, say) is
# never mistaken for a page.
include_patterns = [
    "index.rst",
    "start_here.rst",
    "api_index.rst",
    "sg_execution_times.rst",
    "tutorials/**",
    "api/**",
]

# -- Gallery -----------------------------------------------------------------


sphinx_gallery_conf = {
    "examples_dirs": "advanced",
    "gallery_dirs": "tutorials",
    # Every script is an example to run. GALLERY_PATTERN narrows a build to the
    # pages whose path matches it; the other pages keep their last output.
    "filename_pattern": os.environ.get("GALLERY_PATTERN") or r"/",
    "within_subsection_order": "pagelib.hooks.CourseOrder",
    # A failing example stops the build, naming the file and the traceback.
    "abort_on_example_error": True,
    "remove_config_comments": True,
    # Before each example: Matplotlib's defaults back, torch.compile's caches
    # cleared (not a fresh interpreter: see pagelib/hooks.py), and the run
    # recorded.
    "reset_modules": (
        "matplotlib",
        "pagelib.hooks.reset_torch",
        # Records the PyTorch version, devices and time of each run for the
        # page's verified stamp.
        "pagelib.hooks.record_execution",
    ),
    # The gallery's "download all" zip files of scripts and notebooks.
    "download_all_examples": True,
    # Examples run in parallel worker processes, one per core unless
    # GALLERY_JOBS says otherwise; each page is independent of the others.
    # The number must not depend on what is left to run: this setting is part
    # of the configuration Sphinx hashes, and a build whose configuration
    # differs from the last one's writes every page again.
    "parallel": int(os.environ.get("GALLERY_JOBS") or os.cpu_count() or 1),
    # Figures are losslessly recompressed for the web when optipng is there
    # (.ci/run installs it); without it the build still works.
    "compress_images": ("images", "thumbnails") if shutil.which("optipng") else (),
    "show_signature": False,
    # The names of torch the pages' code uses are linked to the site's API
    # reference (_ext/api_reference.py) from the .codeobj.json files
    # Sphinx-Gallery always writes; its backreference files are not needed:
    # each entry shows the gallery index's own cards of the pages using it.
}

# -- HTML --------------------------------------------------------------------

html_theme = "pydata_sphinx_theme"
html_title = "PyTorch Custom Operators"
html_static_path = ["_static"]
templates_path = ["_templates"]
html_theme_options = {
    "navbar_align": "left",
    "navbar_end": ["edition-switcher", "theme-switcher", "navbar-icon-links"],
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
}
html_show_sourcelink = False
# No general or module index: autodoc's entries (the API reference) would fill
# them, and the API index (api_index.rst) is the site's way from a name to its
# pages. Sphinx's index pages are not laid out for a phone.
html_use_index = False
html_domain_indices = False
html_context = {"default_mode": "auto"}
html_favicon = "_static/favicon.svg"
# Where the site is published, if it is: notebooks then link to the pages they
# refer to (otherwise they name them). Pages are self-contained either way.
html_baseurl = os.environ.get("SITE_URL", "")
# The repository's GitHub address, if it has one: every tutorial then links
# to its notebook in Colab, which opens it from the branch the site's
# workflow publishes the built notebooks to (_ext/colab_links.py).
colab_repository = os.environ.get("REPOSITORY_URL", "")
colab_branch = "notebooks"
# Figures on a light panel in dark mode, phone layout fixes, the cards and
# the verified stamp.
html_css_files = ["custom.css"]
