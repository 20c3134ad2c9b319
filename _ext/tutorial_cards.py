"""A card for each tutorial, generated from the example scripts themselves.

``.. tutorial-cards::`` reads the docstring of every example script of the
gallery, in course order (``pagelib.course.CourseOrder``), and emits a
sphinx-design grid with one card per page: the page's thumbnail, its title
(the docstring's first line), its one-line summary from the course outline
(``pagelib.course.COURSE``) and its floor, the oldest PyTorch release the
version matrix ran it on (``pagelib.records``). Each card links to the page.

A script whose docstring lacks a title, an introductory paragraph or the
version, or that is missing from the course outline, gets a build warning, so
that a card is never silently left blank. The document holding the directive is read
again on every build, so a new, renamed or edited script always shows up.
"""

from pathlib import Path

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.locale import get_translation
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

from pagelib import gallery, records
from pagelib.contract import read_script
from pagelib.course import COURSE, COURSE_FILE, CourseOrder

logger = logging.getLogger(__name__)
# The card footers are our strings, translated from the "site" catalog (see
# editions.py), not the page's: they change with the version records.
_ = get_translation("site")


class TutorialCards(SphinxDirective):
    """``.. tutorial-cards::``: the gallery's pages as a grid of cards."""

    has_content = False

    def run(self):
        env = self.env
        env.tutorial_cards_docs = getattr(env, "tutorial_cards_docs", set())
        env.tutorial_cards_docs.add(env.docname)
        gallery_conf = self.config.sphinx_gallery_conf
        examples_dirs = gallery_conf["examples_dirs"]
        gallery_dirs = gallery_conf["gallery_dirs"]
        if isinstance(examples_dirs, str):
            examples_dirs, gallery_dirs = [examples_dirs], [gallery_dirs]

        rst = [
            ".. grid:: 1 2 2 3",
            "   :gutter: 3",
            "   :class-container: tutorial-cards",
            "",
        ]
        count = 0
        env.note_dependency(str(Path(env.srcdir) / COURSE_FILE))
        for examples_dir, gallery_dir in zip(examples_dirs, gallery_dirs, strict=False):
            folder = Path(env.srcdir) / examples_dir
            order = CourseOrder(str(folder))
            for name in sorted((p.name for p in folder.glob("*.py")), key=order):
                path = folder / name
                card = _read_card(env, path)
                if name in COURSE:
                    card["summary"] = COURSE[name]
                else:
                    card["problems"].append(
                        "it has no one-line summary in the course outline "
                        "(pagelib/course.toml)"
                    )
                for problem in card["problems"]:
                    logger.warning(
                        "tutorial card for %s: %s",
                        name,
                        problem,
                        location=(str(path), card["line"]),
                        type="tutorial_cards",
                    )
                count += 1
                rst += self._card(card, count, Path(name).stem, gallery_dir, env)
        if not count:
            logger.warning(
                "tutorial-cards: no example scripts found",
                location=self.get_location(),
                type="tutorial_cards",
            )
            return []
        container = nodes.container()
        self.state.nested_parse(
            StringList(rst, source="<tutorial-cards>"), self.content_offset, container
        )
        # The footers come translated from our catalog; Sphinx's gettext
        # builder must not put them into the page's catalog as well.
        for footer in container.findall(nodes.container):
            if "tutorial-card-version" in footer["classes"] or any(
                "footer" in name for name in footer["classes"]
            ):
                for paragraph in footer.findall(nodes.paragraph):
                    paragraph["translatable"] = False
        return container.children

    def _card(self, card, step, stem, gallery_dir, env):
        folder = Path(gallery_dir).as_posix().strip("/")
        label = f"sphx_glr_{folder.replace('/', '_')}_{stem}.py"
        thumb = f"{folder}/images/thumb/sphx_glr_{stem}_thumb.png"
        version = (
            _("PyTorch {version} or later").format(version=card["version"])
            if card["version"]
            else _("PyTorch releases not verified")
        )
        footer = _("Part {step} · {version}").format(step=step, version=version)
        lines = [
            f"   .. grid-item-card:: {card['title'] or stem}",
            f"      :link: {label}",
            "      :link-type: ref",
            "      :class-card: tutorial-card",
            "      :class-footer: tutorial-card-version",
        ]
        if (Path(env.srcdir) / thumb).is_file():
            lines += [f"      :img-top: /{thumb}", "      :img-alt:"]
        lines += [
            "",
            f"      {card['summary']}",
            "",
            "      .. card-footer::",
            "",
            f"         {footer}",
            "",
        ]
        return lines


def _read_card(env, path):
    """A script's card: its title, summary, problems (``read_script``) and
    floor (``records.read``), on which the document depends. Kept with the
    environment and reused while the script, its records and the matrix are
    the same files: a prose edit to one page reads one script, not all."""
    inputs = [
        path,
        Path(env.srcdir) / records.RECORDS / f"{path.stem}.json",
        Path(env.srcdir) / records.MATRIX,
    ]
    for dependency in inputs:
        env.note_dependency(str(dependency))
    stamp = tuple(
        (f.stat().st_mtime_ns, f.stat().st_size) if f.is_file() else None
        for f in inputs
    )
    kept = getattr(env, "tutorial_cards_read", {})
    if kept.get(str(path), (None,))[0] != stamp:
        card = read_script(path)
        versions = records.read(env.srcdir, path)
        card["version"] = versions.floor if versions.trusted else None
        kept[str(path)] = (stamp, card)
        env.tutorial_cards_read = kept
    card = dict(kept[str(path)][1])
    card["problems"] = list(card["problems"])
    return card


def reread_card_documents(app, env, added, changed, removed):
    """Read the documents with cards again when a script came or went.

    A card document depends on every script, record and thumbnail it shows
    (``note_dependency``), so an edit re-reads it anyway; only a new script
    is news it cannot depend on yet.
    """
    pages = sorted(gallery.examples(app.config.sphinx_gallery_conf, app.srcdir))
    if getattr(env, "tutorial_cards_pages", None) == pages:
        return []
    env.tutorial_cards_pages = pages
    return sorted(getattr(env, "tutorial_cards_docs", set()) - removed)


def purge(app, env, docname):
    getattr(env, "tutorial_cards_docs", set()).discard(docname)


def merge(app, env, docnames, other):
    env.tutorial_cards_docs = getattr(env, "tutorial_cards_docs", set()) | (
        getattr(other, "tutorial_cards_docs", set()) & set(docnames)
    )
    env.tutorial_cards_read = {
        **getattr(env, "tutorial_cards_read", {}),
        **getattr(other, "tutorial_cards_read", {}),
    }


def setup(app):
    app.add_directive("tutorial-cards", TutorialCards)
    app.connect("env-get-outdated", reread_card_documents)
    app.connect("env-purge-doc", purge)
    app.connect("env-merge-info", merge)
    return {
        "version": "1.0",
        # It keeps tutorial_cards_docs, tutorial_cards_pages and
        # tutorial_cards_read on the build environment: a change to what they
        # hold must raise this number, so that Sphinx drops a pickled
        # environment with the old kind.
        "env_version": 2,
        "parallel_read_safe": True,
        "parallel_write_safe": True,
    }
