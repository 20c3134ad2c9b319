"""Turn the reST of a page's prose into the Markdown a Jupyter reader expects.

Sphinx-Gallery converts only headings, math, notes, links and images to
Markdown; everything else reaches the notebook as reST source. This module
parses each text block with docutils instead, with our Sphinx roles and
directives registered as plain nodes, and writes the document tree back out
as Markdown:

* the "What you will learn" and "Prerequisites" cards become headed lists;
* admonitions (the checklist, notes, warnings) become block quotes;
* a cross-page reference becomes the target page's title, as a link when the
  site's address is known (``html_baseurl``), plain text otherwise;
* other roles become inline code or plain text, list tables become Markdown
  tables, and literal blocks become fenced code.

Anything the writer does not know is an error naming it, so a construct a
page starts to use cannot slip into the notebooks as source.
"""

import re

from docutils import frontend, nodes, utils
from docutils.parsers.rst import Directive, Parser, directives, roles
from docutils.parsers.rst.directives.admonitions import BaseAdmonition
from docutils.parsers.rst.directives.body import CodeBlock

# Headings as Sphinx-Gallery finds them: optional overline, text, underline.
ADORNMENT = "=`:.'\"~^_*+#<>-"
HEADING = re.compile(
    r"(?P<pre>\A|^[ \t]*\n)"
    rf"(?:(?P<over>[{re.escape(ADORNMENT)}])(?P=over)*\n[ \t]*)?"
    r"(?P<heading>\S[^\n]*)\n"
    rf"(?P<under>(?(over)(?P=over)|[{re.escape(ADORNMENT)}]))(?P=under)*[ \t]*$",
    re.M,
)
# A heading becomes a paragraph starting with this token and its depth, so that
# its inline markup is parsed like any other text.
HEADING_TOKEN = re.compile(r"^NOTEBOOKHEADING(\d) ")


class UnsupportedMarkup(ValueError):
    """A construct in a page's prose that has no Markdown form here."""


class crossref(nodes.Inline, nodes.TextElement):  # noqa: N801 - docutils style
    """A :ref: or :doc: to another page, resolved when written."""


class card(nodes.Element):  # noqa: N801
    """A sphinx-design grid item card: a title and a body."""


class grid(nodes.Element):  # noqa: N801
    """A sphinx-design grid: its cards, one after another."""


def _crossref_role(name, rawtext, text, lineno, inliner, options=None, content=()):
    match = re.match(r"^(.*?)\s*<([^<>]+)>$", utils.unescape(text), re.S)
    title, target = (match.group(1), match.group(2)) if match else (None, text)
    node = crossref(rawtext, title or "", target=target.strip(), role=name)
    return [node], []


def _code_role(name, rawtext, text, lineno, inliner, options=None, content=()):
    """An API name as Sphinx shows it: ``title <target>`` shows the title,
    ``~a.b.c`` shows ``c``, and ``!`` (no link) is not shown."""
    text = utils.unescape(text)
    match = re.match(r"^(.*?)\s*<([^<>]+)>$", text, re.S)
    if match and match.group(1):
        shown = match.group(1)
    else:
        shown = text.lstrip("!")
        if shown.startswith("~"):
            shown = shown[1:].rsplit(".", 1)[-1]
    return [nodes.literal(rawtext, shown)], []


def _download_role(name, rawtext, text, lineno, inliner, options=None, content=()):
    """A file the page offers: its title as code (the notebook holds the code)."""
    match = re.match(r"^(.*?)\s*<([^<>]+)>$", utils.unescape(text), re.S)
    shown = match.group(1) if match and match.group(1) else utils.unescape(text)
    return [nodes.literal(rawtext, shown)], []


def _dropped_role(name, rawtext, text, lineno, inliner, options=None, content=()):
    return [], []


class GridDirective(Directive):
    has_content = True
    optional_arguments = 1
    final_argument_whitespace = True
    option_spec = {
        "gutter": directives.unchanged,
        "margin": directives.unchanged,
        "class-container": directives.unchanged,
        "class-row": directives.unchanged,
    }

    def run(self):
        node = grid()
        self.state.nested_parse(self.content, self.content_offset, node)
        return [node]


class CardDirective(Directive):
    has_content = True
    optional_arguments = 1
    final_argument_whitespace = True
    option_spec = {
        "class-card": directives.unchanged,
        "class-body": directives.unchanged,
        "class-title": directives.unchanged,
        "class-footer": directives.unchanged,
        "link": directives.unchanged,
        "link-type": directives.unchanged,
        "columns": directives.unchanged,
    }

    def run(self):
        node = card()
        if self.arguments:
            text_nodes, _ = self.state.inline_text(self.arguments[0], self.lineno)
            node += nodes.title("", "", *text_nodes)
        self.state.nested_parse(self.content, self.content_offset, node)
        return [node]


class DroppedDirective(Directive):
    """A directive that only the site can render (it reads the build's data,
    such as ``sharp-edges-table``): nothing in a notebook."""

    has_content = False

    def run(self):
        return []


class seealso(nodes.Admonition, nodes.Element):  # noqa: N801
    """Sphinx's ``seealso`` admonition, which docutils does not know."""


class SeeAlso(BaseAdmonition):
    node_class = seealso


class PythonCodeBlock(CodeBlock):
    """``code-block`` as Sphinx spells it: the language is optional."""

    optional_arguments = 1
    required_arguments = 0


def _register():
    for name in ("ref", "doc"):
        roles.register_local_role(name, _crossref_role)
    for name in ("func", "class", "meth", "mod", "attr", "obj", "data", "exc"):
        roles.register_local_role(name, _code_role)
        roles.register_local_role(f"py:{name}", _code_role)
    roles.register_local_role("download", _download_role)
    roles.register_local_role("octicon", _dropped_role)
    directives.register_directive("grid", GridDirective)
    directives.register_directive("grid-item-card", CardDirective)
    directives.register_directive("code-block", PythonCodeBlock)
    directives.register_directive("sharp-edges-table", DroppedDirective)
    directives.register_directive("seealso", SeeAlso)


def _parse(text):
    # Our roles and directives stand in for Sphinx's only while we parse:
    # docutils keeps them in global registries that the Sphinx build shares.
    # (Sphinx's own docutils_namespace() would also unregister the node
    # classes of every extension, in the middle of the build.)
    saved = dict(directives._directives), dict(roles._roles)
    try:
        _register()
        return _parse_registered(text)
    finally:
        directives._directives.clear()
        directives._directives.update(saved[0])
        roles._roles.clear()
        roles._roles.update(saved[1])


def _parse_registered(text):
    settings = frontend.get_default_settings(Parser)
    settings.report_level = 5  # problems become exceptions below, not output
    settings.halt_level = 3
    settings.file_insertion_enabled = False
    settings.raw_enabled = False
    document = utils.new_document("<page prose>", settings)
    Parser().parse(text, document)
    return document


def convert_headings(text, levels):
    """Headings to placeholder lines; ``levels`` maps adornments to depth."""

    def replace(match):
        style = (match.group("over"), match.group("under"))
        depth = levels.setdefault(style, len(levels) + 1)
        return f"{match.group('pre')}NOTEBOOKHEADING{depth} {match.group('heading')}"

    return HEADING.sub(replace, text)


class MarkdownWriter:
    """Write a docutils tree as Markdown, refusing what it does not know."""

    def __init__(self, resolve):
        self.resolve = resolve  # (role, target, title) -> Markdown text

    # -- blocks ------------------------------------------------------------

    def blocks(self, node):
        parts = [self.block(child) for child in node.children]
        return "\n\n".join(part for part in parts if part)

    def block(self, node):
        method = getattr(self, f"block_{type(node).__name__}", None)
        if method is None:
            raise UnsupportedMarkup(f"no Markdown for a {type(node).__name__} block")
        return method(node)

    def block_paragraph(self, node):
        text = self.inline(node)
        heading = HEADING_TOKEN.match(text)
        if heading:
            return "#" * int(heading.group(1)) + " " + text[heading.end() :]
        return text

    def block_comment(self, node):
        return ""

    def block_system_message(self, node):
        # docutils notes (level 1, such as "list start value not ordinal-1")
        # are not content; anything graver stops the parse (halt_level).
        if node["level"] > 1:
            raise UnsupportedMarkup(f"reST the parser warned about: {node.astext()!r}")
        return ""

    block_target = block_substitution_definition = block_comment

    def block_bullet_list(self, node):
        return self._list(node, lambda index: "*")

    def block_enumerated_list(self, node):
        start = node.get("start", 1)
        return self._list(node, lambda index: f"{start + index}.")

    def _list(self, node, marker):
        items = []
        for index, item in enumerate(node.children):
            bullet = marker(index)
            body = self.blocks(item)
            indent = " " * (len(bullet) + 1)
            lines = body.splitlines() or [""]
            items.append(
                f"{bullet} {lines[0]}"
                + "".join(f"\n{indent}{line}" if line else "\n" for line in lines[1:])
            )
        return "\n".join(items)

    def block_literal_block(self, node):
        classes = [c for c in node.get("classes", []) if c not in ("code",)]
        language = classes[0] if classes else ""
        text = node.astext()
        fence = "```" if "```" not in text else "~~~~"
        return f"{fence}{language}\n{text}\n{fence}"

    def block_block_quote(self, node):
        return self._quote(self.blocks(node))

    def _quote(self, text):
        return "\n".join(f"> {line}" if line else ">" for line in text.splitlines())

    def block_admonition(self, node):
        title = node.next_node(nodes.title)
        heading = self.inline(title) if title is not None else "Note"
        body = [child for child in node.children if not isinstance(child, nodes.title)]
        text = "\n\n".join(self.block(child) for child in body)
        return self._quote(f"**{heading}**\n\n{text}")

    def _named(self, name, node):
        return self._quote(f"**{name}**\n\n{self.blocks(node)}")

    def block_note(self, node):
        return self._named("Note", node)

    def block_warning(self, node):
        return self._named("Warning", node)

    def block_tip(self, node):
        return self._named("Tip", node)

    def block_important(self, node):
        return self._named("Important", node)

    def block_hint(self, node):
        return self._named("Hint", node)

    def block_caution(self, node):
        return self._named("Caution", node)

    def block_attention(self, node):
        return self._named("Attention", node)

    def block_seealso(self, node):
        return self._named("See also", node)

    def block_rubric(self, node):
        return f"**{self.inline(node)}**"

    def block_math_block(self, node):
        return f"$$\n{node.astext()}\n$$"

    def block_image(self, node):
        return f"![{node.get('alt', '')}]({node['uri']})"

    def block_grid(self, node):
        return self.blocks(node)

    def block_card(self, node):
        title = node.next_node(nodes.title)
        heading = self.inline(title).strip() if title is not None else ""
        body = [child for child in node.children if not isinstance(child, nodes.title)]
        text = "\n\n".join(self.block(child) for child in body)
        return f"**{heading}**\n\n{text}" if heading else text

    def block_table(self, node):
        rows = []
        for row in node.findall(nodes.row):
            cells = [
                self.blocks(entry).replace("\n\n", "<br>").replace("\n", " ")
                for entry in row.children
            ]
            rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        if not rows:
            return ""
        width = rows[0].count(" | ") + 1
        separator = "| " + " | ".join("---" for _ in range(width)) + " |"
        return "\n".join([rows[0], separator, *rows[1:]])

    def block_container(self, node):
        return self.blocks(node)

    # -- inline ------------------------------------------------------------

    def inline(self, node):
        return "".join(self.inline_node(child) for child in node.children)

    def inline_node(self, node):
        if isinstance(node, nodes.Text):
            return self.inline_text(node.astext())
        method = getattr(self, f"inline_{type(node).__name__}", None)
        if method is None:
            raise UnsupportedMarkup(f"no Markdown for inline {type(node).__name__}")
        return method(node)

    @staticmethod
    def inline_text(text):
        # An underscore between two letters or digits ("custom_op") cannot
        # start or end emphasis in Markdown, so it stays as written; every
        # other one is escaped, like the other characters Markdown reads.
        return re.sub(
            r"([\\`*\[\]<>|]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))", r"\\\1", text
        )

    def inline_literal(self, node):
        text = node.astext()
        ticks = "`" * (max((len(m) for m in re.findall(r"`+", text)), default=0) + 1)
        pad = " " if text.startswith("`") or text.endswith("`") else ""
        return f"{ticks}{pad}{text}{pad}{ticks}"

    def inline_emphasis(self, node):
        return f"*{self.inline(node)}*"

    def inline_strong(self, node):
        return f"**{self.inline(node)}**"

    def inline_reference(self, node):
        uri = node.get("refuri")
        text = self.inline(node)
        return f"[{text}]({uri})" if uri else text

    def inline_target(self, node):
        # An inline target (_`a phrase`) shows its phrase; a bare one nothing.
        return self.inline(node)

    def inline_math(self, node):
        return f"${node.astext()}$"

    def inline_crossref(self, node):
        return self.resolve(node["role"], node["target"], node.astext())

    def inline_title_reference(self, node):
        return f"*{self.inline(node)}*"

    def inline_problematic(self, node):
        raise UnsupportedMarkup(f"reST the parser could not read: {node.astext()!r}")


def to_markdown(text, levels, resolve):
    """Markdown for one text block of a page (``levels``: shared heading depths)."""
    document = _parse(convert_headings(text, levels))
    for message in document.findall(nodes.system_message):
        if message["level"] >= 2:
            raise UnsupportedMarkup(message.astext())
    return MarkdownWriter(resolve).blocks(document).strip() + "\n"
