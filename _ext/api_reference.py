"""An API reference of the torch the pages ran on, linked from their code.

Every name of the course's torch API (``pagelib.api_names.NAMESPACES``)
that a page's code uses gets a page of its own under ``api/``, generated at
each build from what Sphinx-Gallery's ``identify_names`` found in the pages'
code (the ``.codeobj.json`` files): no list kept by hand, and no inventory
fetched from the network. Each entry page holds:

* the object's documentation, rendered by autodoc from the installed torch's
  own docstring, so it describes the release the pages ran on. torch's
  docstrings are English in every edition (marked ``lang="en"``); those of the
  course's own checker are translated from a catalog per entry, and a
  translated edition warns about a checker entry with prose and no catalog
  (``make catalogs`` makes the catalogs from a gettext build in which
  ``generate_entries`` writes an entry for each name of the checker's public
  API, since which of them the pages use is known only once they ran). A
  docstring that is not valid reStructuredText here (or needs math
  typesetting, which an offline site does not load) is shown as plain text
  under the signature, with a line saying so: the build stays clean under
  ``-W`` without hiding any warning of the site's own sources;
* the pages that use it, as their cards: the gallery index's own cards
  (translated there in a translated edition), copied in when the entry is
  written (``MiniGallery``). An edited card therefore rewrites the entries
  showing it (``rewrite_entries``) without reading them again: reading an
  entry runs autodoc, writing one does not.

Sphinx-Gallery then links each such name in the pages' code to its entry
(its doctree-based code links resolve names against the Python domain), in
both editions. ``.. api-index::`` lists every entry with the pages that use
it. A name of the course's API that a page's code uses but that ends up
documented nowhere, or not linked in the code, is a build warning, so ``-W``
stops the build rather than leave a dead or missing link.
"""

import inspect
import pkgutil
import re
from pathlib import Path

from docutils import nodes
from docutils.statemachine import StringList
from docutils.utils import Reporter
from sphinx import addnodes
from sphinx.locale import get_translation
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import make_refnode
from sphinx_gallery._doctree_links import CodeLinksTransform

from pagelib import api_names, checker, gallery, hooks, layout

logger = logging.getLogger(__name__)
_ = get_translation(layout.SITE_CATALOG)
# The page that holds ``.. api-index::``.
INDEX_DOC = "api_index"


def _examples(app):
    return gallery.examples(app.config.sphinx_gallery_conf, app.srcdir)


def generate_entries(app):
    """Write ``api/<name>.rst`` for every course-API name the pages use, and
    remove the pages of names no longer used. Runs after Sphinx-Gallery has
    written the gallery (and the pages' ``.codeobj.json``). A file is written
    only when its text changed, so an unchanged entry is not read again.

    The gettext build, which makes the catalogs, writes instead an entry for
    each name of the translated namespaces' public API, listed in no index:
    which of them the pages use is known only once the pages ran. PyTorch's
    entries get no catalog."""
    used, aliases = {}, {}
    if app.builder.name == "gettext":
        documented = translated_api()
    else:
        found = api_names.usage(api_names.read_codeobjs(_examples(app), app.srcdir))
        used, aliases = _entries(app.env, found)
        documented = list(used)
    # The last build's usage, kept with the environment: what the index and
    # the entries compare with (reread_index, rewrite_entries).
    app.env.api_reference_before = getattr(app.env, "api_reference_next", None)
    app.env.api_reference_next = used
    app.env.api_reference_aliases = aliases
    folder = Path(app.srcdir) / api_names.FOLDER
    wanted = {f"{name}.rst": api_names.entry_source(name) for name in documented}
    if folder.is_dir():
        for stale in folder.glob("*.rst"):
            if stale.name not in wanted:
                stale.unlink()
    folder.mkdir(exist_ok=True)
    for filename, text in wanted.items():
        path = folder / filename
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")


def translated_api():
    """The names an entry of a translated namespace could document."""
    names = []
    for namespace in api_names.TRANSLATED_NAMESPACES:
        names += api_names.public_api(namespace, pkgutil.resolve_name(namespace))
    return names


def _entries(env, found):
    """({entry: pages}, {name: its entry}) from {name: pages} as the pages'
    code names them: names that do not resolve to an object are left out
    (what Sphinx-Gallery guessed from an instance's type, such as
    ``torch.autograd.FunctionCtx``), and the names of one object share one
    entry, the shortest (``torch.autograd.GradcheckError`` for
    ``torch.autograd.gradcheck.GradcheckError`` too). Resolving imports torch,
    so the answer is kept with the environment and reused while the names
    found are the same: a no-op build imports nothing, and neither does one
    whose pages name nothing of torch's (a second of CPU in each build of a
    test's one-page copy)."""
    kept = getattr(env, "api_reference_resolved", None)
    if kept is not None and kept[0] == found:
        return kept[1], kept[2]
    if any(name.split(".")[0] == "torch" for name in found):
        hooks.quietly_import_cpp_extension()
    groups = {}
    for name in found:
        try:
            obj = _resolve(name)
        except (ImportError, AttributeError, ValueError):
            continue
        plain = obj is None or isinstance(obj, (str, int, float, bool))
        groups.setdefault(name if plain else id(obj), []).append(name)
    aliases = {}
    for names in groups.values():
        entry = min(names, key=lambda n: (n.count("."), len(n), n))
        aliases.update(dict.fromkeys(names, entry))
    pages = {}
    for name, users in found.items():
        if name in aliases:
            pages.setdefault(aliases[name], set()).update(users)
    used = {
        name: sorted(pages[name], key=api_names.course_rank) for name in sorted(pages)
    }
    env.api_reference_resolved = (found, used, aliases)
    return used, aliases


def reread_index(app, env, added, changed, removed):
    """The pages holding ``.. api-index::`` are read again when the list of
    entries or the pages using them changed."""
    if getattr(env, "api_reference_before", None) == env.api_reference_next:
        return []
    return [INDEX_DOC] if INDEX_DOC in env.found_docs else []


def _resolve(name):
    """The object the code means by ``name``: an attribute of its parent
    before a submodule of the same name (``torch.autograd.gradcheck`` is a
    function, though a module of that name exists too)."""
    parent, _, attribute = name.rpartition(".")
    try:
        return getattr(pkgutil.resolve_name(parent), attribute)
    except (ImportError, AttributeError, ValueError):
        return pkgutil.resolve_name(name)


def _kind(name, obj):
    parent_name, _, attribute = name.rpartition(".")
    try:
        parent = pkgutil.resolve_name(parent_name)
    except (ImportError, AttributeError, ValueError):
        parent = None
    if inspect.isclass(parent) and not inspect.isclass(obj):
        static = inspect.getattr_static(parent, attribute, None)
        if isinstance(static, property):
            return "property"
        return "method" if callable(obj) else "attribute"
    if inspect.ismodule(obj):
        return "module"
    if inspect.isclass(obj):
        return "class"
    if callable(obj):
        return "function"
    return "data"


class ApiEntry(SphinxDirective):
    """``.. api-entry:: torch.library.custom_op``: the object's documentation
    and the cards of the pages that use it."""

    required_arguments = 1

    def run(self):
        name = self.arguments[0]
        if name.split(".")[0] == "operator_checker":
            # The course's checker changes with the checkout, unlike the
            # installed torch: its entries are read again when it does.
            for path in checker.files():
                self.env.note_dependency(str(path))
        # Its CUDA notice says nothing about the build (pagelib/hooks.py).
        hooks.quietly_import_cpp_extension()
        obj = _resolve(name)
        result, problem = self._render(f".. auto{_kind(name, obj)}:: {name}")
        if problem:
            result = _signature_only(result) + self._plain_docstring(obj, problem)
        classes = ["api-docstring"]
        if api_names.is_translated(name):
            # The course's own docstrings are translated with the entry's
            # catalog, like the pages.
            self._check_catalog(result)
        else:
            # torch's docstrings are English in every edition; a Chinese page
            # says so (lang="en"), for screen readers and the browser tests.
            classes.append("language-en")
        docstring = nodes.container("", *result, classes=classes)
        heading = nodes.rubric("", _("Pages that use it"))
        heading["translatable"] = False  # in the edition's language already
        return [docstring, heading, pages_using(name=name)]

    def _check_catalog(self, rendered):
        """In a translated edition, a docstring with prose and no catalog
        would show in English: a warning, which names the command."""
        language = self.config.language
        if not layout.is_translation(language):
            return
        prose = any(
            next(iter(content.findall(nodes.paragraph)), None) is not None
            for node in rendered
            for content in node.findall(addnodes.desc_content)
        )
        path = layout.catalog_path(self.env.srcdir, language, self.env.docname)
        if prose and not path.is_file():
            self.env.note_dependency(str(path))
            logger.warning(
                "%s has no %s catalog, so its docstring would show in English: "
                "run `make catalogs`, then translate %s",
                self.arguments[0],
                language,
                path.relative_to(self.env.srcdir),
                location=self.env.docname,
                type="api_reference",
            )

    def _parse(self, lines):
        holder = nodes.Element()
        self.state.nested_parse(
            StringList(lines, source=f"<api-entry {self.arguments[0]}>"),
            self.content_offset,
            holder,
        )
        return list(holder.children)

    def _render(self, directive):
        """(nodes, problem): the entry rendered once by autodoc, with
        docutils' messages about its docstring collected instead of reported,
        and the first problem they or the result show (None if none)."""
        document = self.state.document
        memo = self.state.memo
        saved = document.reporter, memo.reporter
        collector = Reporter(saved[0].source, Reporter.SEVERE_LEVEL + 1, 5)
        messages = []
        collector.attach_observer(messages.append)
        document.reporter = memo.reporter = collector
        try:
            rendered = self._parse([directive])
        finally:
            document.reporter, memo.reporter = saved
        for message in messages:
            if message["level"] >= Reporter.WARNING_LEVEL:
                text = message.children[0].astext() if message.children else ""
                return rendered, text.rstrip(".") or message["type"]
        for node in rendered:
            if next(iter(node.findall(nodes.math)), None) is not None or next(
                iter(node.findall(nodes.math_block)), None
            ):
                problem = _(
                    "it has mathematics, which this offline site does not typeset"
                )
                return rendered, problem
        return rendered, None

    def _plain_docstring(self, obj, problem):
        note = nodes.paragraph(
            "",
            _(
                "This docstring is shown as plain text: it does not render as "
                "reStructuredText here ({problem})."
            ).format(problem=problem),
            classes=["api-plain-note"],
        )
        text = inspect.getdoc(obj) or ""
        block = nodes.literal_block(text, text, classes=["api-plain-docstring"])
        block["language"] = "text"
        return [note, block]


def without_type_docstring(app, what, name, obj, options, lines):
    """A constant's entry shows its own documentation (a ``#:`` comment) or
    none: autodoc falls back to the docstring of the value's type (``tuple``'s
    "Built-in immutable sequence."), which says nothing of the constant."""
    if what not in ("data", "attribute") or inspect.isclass(obj):
        return
    own = " ".join("\n".join(lines).split())
    if own and own == " ".join((type(obj).__doc__ or "").split()):
        lines[:] = []


def docstring_reference_as_text(app, env, node, contnode):
    """A ``:ref:`` in a torch docstring names a section of PyTorch's own
    documentation, which this site does not have: its text stays, unlinked,
    rather than a link to nothing. References anywhere else are left to
    Sphinx, which warns about a missing one."""
    if node.get("refdomain") != "std" or node.get("reftype") != "ref":
        return None
    if not node.get("refdoc", "").startswith(api_names.FOLDER + "/"):
        return None
    if "docstring of " not in (node.source or ""):
        return None
    return contnode


def relative_links_as_text(app, doctree):
    """A hyperlink in a torch docstring to a page of PyTorch's own
    documentation by a relative address (```the ctx <context_method_mixins>`_``
    in ``register_autograd``) would point at nothing on this site: its text
    stays, unlinked. Addresses with a scheme, and anchors, stay links."""
    if not app.env.docname.startswith(api_names.FOLDER + "/"):
        return
    for reference in list(doctree.findall(nodes.reference)):
        uri = reference.get("refuri")
        if uri and not uri.startswith("#") and "://" not in uri:
            if not uri.startswith("mailto:"):
                reference.replace_self(nodes.inline("", "", *reference.children))


def _signature_only(rendered):
    """What autodoc rendered, less the docstring: the index entries and
    targets, and each description's signature with its content emptied."""
    kept = []
    for node in rendered:
        if isinstance(node, addnodes.desc):
            for content in node.findall(addnodes.desc_content):
                content.children = []
            kept.append(node)
        elif isinstance(node, (addnodes.index, nodes.target)):
            kept.append(node)
    return kept


class ApiIndex(SphinxDirective):
    """``.. api-index::``: every entry, by namespace, with the pages that use
    it, and the (hidden) table of contents of the entry pages."""

    def run(self):
        used = getattr(self.env, "api_reference_next", {})
        if not used:
            return []
        lines = []
        namespace = None
        for name, pages in used.items():
            if api_names.namespace_of(name) != namespace:
                namespace = api_names.namespace_of(name)
                lines += ["", f".. rubric:: ``{namespace}``", ""]
            entry = f":py:obj:`{name}`"
            users = ", ".join(f":doc:`/{page}`" for page in pages)
            lines += [f"* {entry}: {users}"]
        lines += ["", ".. toctree::", "   :hidden:", ""]
        lines += [f"   /{api_names.entry_docname(name)}" for name in used]
        holder = nodes.container(classes=["api-index"])
        self.state.nested_parse(
            StringList(lines, source="<api-index>"), self.content_offset, holder
        )
        return [holder]


def check_entries(app, env):
    """Every entry documents its object: a name the pages' code uses that is
    documented nowhere would be a link to nothing."""
    objects = env.domains["py"].objects
    for name, pages in getattr(env, "api_reference_next", {}).items():
        if name not in objects:
            logger.warning(
                "%s is used by %s but documented nowhere, so its code links "
                "would point nowhere",
                name,
                ", ".join(pages),
                type="api_reference",
            )


# Sphinx-Gallery's code links turn each code block into one node per token
# (about 130,000 in an edition) at priority 5, before every other
# post-transform; each later one that walks the whole tree (Sphinx-Design's
# tabs, dropdowns and asides, the theme's short links, Sphinx's images and
# highlighting) then walked them all: about a tenth of a build's CPU. They
# run last instead, after Sphinx has set each block's language
# (HighlightLanguageTransform, 400) and trimmed doctest flags (401): what
# they read of a block is what they read before, and the pages come out the
# same, byte for byte.
CODE_LINKS_PRIORITY = 402


class CheckCodeLinks(SphinxPostTransform):
    """After Sphinx-Gallery's code links: decorators link too,
    and every course-API name the page's visible code uses is a link to a
    page of this build.

    Pygments reads ``@torch.library.custom_op`` as one decorator token, which
    Sphinx-Gallery leaves unlinked; the course's main API is mostly used that
    way. Names used only in code the page hides (``sphinx_gallery_start_ignore``)
    are not expected on the page, nor the types Sphinx-Gallery infers for
    variables (their links are a bonus)."""

    default_priority = CODE_LINKS_PRIORITY + 1
    formats = ("html",)

    def run(self, **kwargs):
        docname = self.env.docname
        codeobjs = api_names.read_codeobjs([docname], self.env.srcdir)
        if docname not in codeobjs:
            return
        codeobj = codeobjs[docname]
        blocks = [
            block
            for block in self.document.findall(nodes.Element)
            if type(block).__name__ == "code_links_block"
        ]
        for block in blocks:
            self._link_decorators(block, codeobj)
        code = "\n".join(block.astext() for block in blocks)
        aliases = getattr(self.env, "api_reference_aliases", {})
        wanted = set()
        for written, candidates in codeobj.items():
            # Names as the code writes them: not what Sphinx-Gallery guessed
            # from the type of a variable (``ctx`` -> FunctionCtx).
            last = written.rsplit(".", 1)[-1]
            implicit = [
                c
                for c in candidates
                if not c.get("is_explicit") and c["name"].rsplit(".", 1)[-1] == last
            ]
            if implicit and re.search(
                r"(?<![\w.])" + re.escape(written) + r"(?!\w)", code
            ):
                names = api_names.names_in_codeobj({written: implicit})
                wanted |= {aliases[name] for name in names if name in aliases}
        linked = set()
        for block in blocks:
            for reference in block.findall(nodes.reference):
                title = reference.get("reftitle", "")
                linked.add(aliases.get(title, title))
                if not (reference.get("refuri") or reference.get("refid")):
                    logger.warning(
                        "code link %s points nowhere",
                        reference.get("reftitle"),
                        location=docname,
                        type="api_reference",
                    )
        for name in sorted(wanted - linked):
            logger.warning(
                "%s in this page's code links to no API entry",
                name,
                location=docname,
                type="api_reference",
            )

    def _link_decorators(self, block, codeobj):
        """``@torch.library.custom_op(...)``: Pygments makes ``@torch`` one
        decorator token, so Sphinx-Gallery never sees the dotted name."""
        objects = self.env.domains["py"].objects
        children = list(block.children)
        i = 0
        while i < len(children):
            token = children[i]
            i += 1
            if not _is_token(token, "nd") or not token.astext().startswith("@"):
                continue
            parts, span = [token.astext()[1:]], [1]
            j = i
            while j + 1 < len(children) and _is_token(children[j], "o"):
                if children[j].astext() != "." or not _is_token(children[j + 1], "n"):
                    break
                parts.append(children[j + 1].astext())
                span.append(span[-1] + 2)
                j += 2
            found = None
            for k in range(len(parts), 0, -1):
                for candidate in codeobj.get(".".join(parts[:k]), []):
                    name = f"{candidate['module_short']}.{candidate['name']}"
                    if name in objects:
                        found, length = name, span[k - 1]
                        break
                if found:
                    break
            if found is None:
                continue
            entry = objects[found]
            first = token.astext()[1:]
            inner = [nodes.inline(first, first, classes=["nd"])]
            inner += [child.deepcopy() for child in children[i : i - 1 + length]]
            reference = make_refnode(
                self.app.builder,
                self.env.docname,
                entry.docname,
                entry.node_id,
                inner,
                title=found,
            )
            module = found.rsplit(".", 1)[0].replace(".", "-")
            reference["classes"] += [
                f"sphx-glr-backref-module-{module}",
                f"sphx-glr-backref-type-py-{entry.objtype}",
            ]
            index = block.index(token)
            for child in children[i - 1 : i - 1 + length]:
                block.remove(child)
            block.insert(index, reference)
            block.insert(index, nodes.inline("@", "@", classes=["nd"]))
            i = i - 1 + length


def _is_token(node, css):
    return isinstance(node, nodes.inline) and css in node["classes"]


# -- Mini-galleries: the cards of the pages using an entry ----------------------


class pages_using(nodes.General, nodes.Element):
    """Where an entry's mini-gallery goes; ``MiniGallery`` fills it in when
    the entry is written."""


def _gallery_indexes(app):
    """{page docname: the docname of the gallery index showing its card}."""
    conf = app.config.sphinx_gallery_conf
    return {
        docname: (folder / "index").relative_to(app.srcdir).as_posix()
        for docname, (_source, folder) in gallery.examples(conf, app.srcdir).items()
    }


_CARDS = {}


def _doctree_stamp(env, docname):
    """When this build last wrote ``docname``'s doctree, or None."""
    path = env.doctreedir / f"{docname}.doctree"
    return path.stat().st_mtime_ns if path.is_file() else None


def gallery_cards(env, index):
    """{page docname: its card's nodes} in the gallery index ``index`` as
    this build read it: Sphinx-Gallery's thumbnail, from the ``raw`` node
    opening ``sphx-glr-thumbcontainer`` to the one holding its title."""
    key = (str(env.doctreedir), index, _doctree_stamp(env, index))
    if key not in _CARDS:
        found = {}
        if key[2] is not None:
            for start in env.get_doctree(index).findall(nodes.raw):
                if 'class="sphx-glr-thumbcontainer"' not in start.astext():
                    continue
                card, node = [start], start
                while not (
                    isinstance(node, nodes.raw)
                    and "sphx-glr-thumbnail-title" in node.astext()
                ):
                    node = node.next_node(descend=False, siblings=True)
                    if node is None:
                        break
                    card.append(node)
                xrefs = [x for n in card for x in n.findall(addnodes.pending_xref)]
                if node is not None and xrefs:
                    found[xrefs[0]["reftarget"].lstrip("/")] = card
        _CARDS.clear()
        _CARDS[key] = found
    return _CARDS[key]


def _card_text(card):
    return "".join(node.pformat() for node in card)


class MiniGallery(SphinxPostTransform):
    """An entry's mini-gallery: the cards of the pages using it, in course
    order, copied from the gallery index, before references are resolved
    (priority 10), so their links and images are this page's own."""

    default_priority = 4

    def run(self, **kwargs):
        holders = list(self.document.findall(pages_using))
        if not holders:
            return
        indexes = _gallery_indexes(self.app)
        used = getattr(self.env, "api_reference_next", {})
        for holder in holders:
            gallery_div = nodes.container(classes=["sphx-glr-thumbnails"])
            for page in used.get(holder["name"], []):
                card = gallery_cards(self.env, indexes.get(page, "")).get(page)
                if card is None:
                    logger.warning(
                        "the card of %s, which uses %s, is in no gallery index",
                        page,
                        holder["name"],
                        location=self.env.docname,
                        type="api_reference",
                    )
                    continue
                for node in card:
                    copy = node.deepcopy()
                    for xref in copy.findall(addnodes.pending_xref):
                        xref["refdoc"] = self.env.docname
                    gallery_div += copy
            holder.replace_self(gallery_div)


def rewrite_entries(app, env):
    """The entries to write again though they were not read: those whose
    list of pages changed, or one of whose pages' card did (the cards are
    copied in at writing, ``MiniGallery``)."""
    used = env.api_reference_next
    before_used = env.api_reference_before or {}
    indexes = sorted(set(_gallery_indexes(app).values()))
    stamps = [_doctree_stamp(env, index) for index in indexes]
    before_stamps, before_cards = getattr(env, "api_reference_cards", (None, {}))
    if before_used == used and before_stamps == stamps:
        return []  # no gallery index read again: no card changed
    cards = {}
    for index in indexes:
        for page, card in gallery_cards(env, index).items():
            cards[page] = _card_text(card)
    env.api_reference_cards = (stamps, cards)
    changed = {
        page
        for page in cards.keys() | before_cards.keys()
        if cards.get(page) != before_cards.get(page)
    }
    return [
        api_names.entry_docname(name)
        for name, pages in used.items()
        if before_used.get(name) != pages or changed.intersection(pages)
        if api_names.entry_docname(name) in env.found_docs
    ]


def setup(app):
    app.setup_extension("sphinx.ext.autodoc")
    app.setup_extension("sphinx.ext.napoleon")
    app.add_node(pages_using)
    app.add_directive("api-entry", ApiEntry)
    app.add_directive("api-index", ApiIndex)
    # After Sphinx-Gallery has written the gallery (priority 500).
    app.connect("builder-inited", generate_entries, priority=900)
    app.connect("env-get-outdated", reread_index)
    app.connect("env-check-consistency", check_entries)
    app.connect("autodoc-process-docstring", without_type_docstring)
    app.connect("missing-reference", docstring_reference_as_text)
    app.connect("env-get-updated", rewrite_entries)
    app.connect("doctree-read", relative_links_as_text)
    CodeLinksTransform.default_priority = CODE_LINKS_PRIORITY
    app.add_post_transform(CheckCodeLinks)
    app.add_post_transform(MiniGallery)
    app.add_css_file("api_reference.css")
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
