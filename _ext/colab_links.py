""" "Open in Colab" on every tutorial, when the repository's address is known.

Colab opens a notebook from GitHub by its path in a branch
(``https://colab.research.google.com/github/<owner>/<repo>/blob/<branch>/<path>``).
The notebooks are built, not committed: the site's workflow publishes the
ones a build wrote to the branch ``colab_branch`` of the repository, at the
paths they have in the source tree (``tutorials/<name>.ipynb``, and
``tutorials_<language>/<name>.ipynb`` for a translated edition, whose page
links to its own language's notebook). ``colab_repository`` (conf.py, from
``REPOSITORY_URL``) is the repository's GitHub address; without it no page
gets the link, and nothing is said. An address that is not a GitHub
repository's is a build warning.
"""

import re
from urllib.parse import quote

from docutils import nodes
from sphinx.locale import get_translation
from sphinx.util import logging

from pagelib import gallery, layout

logger = logging.getLogger(__name__)
_ = get_translation(layout.SITE_CATALOG)

GITHUB_REPOSITORY = re.compile(
    r"^https://github\.com/(?P<owner>[\w.-]+)/(?P<repo>[\w.-]+?)(?:\.git)?/?$"
)
COLAB = "https://colab.research.google.com/github"


def repository(config):
    """(owner, repo) from ``colab_repository``, or None."""
    match = GITHUB_REPOSITORY.match(config.colab_repository or "")
    return (match["owner"], match["repo"]) if match else None


def check_address(app, config):
    if config.colab_repository and repository(config) is None:
        logger.warning(
            "colab_repository (REPOSITORY_URL) is %r, not a GitHub repository's "
            "address (https://github.com/<owner>/<repo>): no Colab links",
            config.colab_repository,
            type="colab_links",
        )


def colab_url(owner, repo, branch, path):
    return f"{COLAB}/{owner}/{repo}/blob/{quote(branch)}/{quote(path)}"


def notebook_path(app, docname):
    """The notebook of this edition's page, relative to the source tree."""
    name = docname.rsplit("/", 1)[-1] + ".ipynb"
    language = app.config.language
    if layout.is_translation(language):
        folder = layout.translated_downloads(app.srcdir, language)
        return (folder / name).relative_to(app.srcdir).as_posix()
    return f"{docname}.ipynb"


def add_link(app, doctree):
    found = repository(app.config)
    if found is None:
        return
    docname = app.env.docname
    if docname not in gallery.examples(app.config.sphinx_gallery_conf, app.srcdir):
        return
    section = next(iter(doctree.findall(nodes.section)), None)
    if section is None:
        return
    url = colab_url(*found, app.config.colab_branch, notebook_path(app, docname))
    text = _("Open in Colab")
    link = nodes.reference(text, text, refuri=url, classes=["colab-link"])
    paragraph = nodes.paragraph("", "", link, classes=["colab-link-line"])
    title = next(iter(section.findall(nodes.title)), None)
    section.insert(section.index(title) + 1 if title is not None else 0, paragraph)


def setup(app):
    # "env": the link is part of each page's doctree, so a new address makes
    # Sphinx read the pages again.
    app.add_config_value("colab_repository", "", "env", types=[str])
    app.add_config_value("colab_branch", "notebooks", "env", types=[str])
    app.connect("config-inited", check_address)
    app.connect("doctree-read", add_link)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
