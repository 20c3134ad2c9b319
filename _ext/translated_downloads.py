"""The ``.py`` and ``.ipynb`` downloads of a translated page, in its language.

A translated page's download buttons must give a reader the script they can
read: the page's prose in the page's language, around code identical to the
English script's. Before the translated edition is read, ``make_downloads``
writes, for every example, ``tutorials_<language>/<name>.py`` from
``advanced/<name>.py`` with each prose message replaced by its translation from
the page's catalog (``locale/<language>/LC_MESSAGES/tutorials/<name>.po``),
the notebook from that script (``notebooks.build``), and the gallery's two zip
files. ``point_downloads`` then makes the page's download links point at them.

A message is found in the script's prose (the module docstring and the
comment blocks after ``# %%``) by its words, whatever the line breaks and
indentation between them, in document order; the translation is wrapped to
the same indentation, and a retitled heading gets an underline as wide as its
new text.
"""

import ast
import io
import re
import unicodedata
import zipfile
from pathlib import Path

from babel.messages.pofile import read_po
from docutils import nodes
from sphinx.transforms.i18n import parse_noqa
from sphinx.util import logging

logger = logging.getLogger(__name__)

COMMENT_BLOCK_START = re.compile(r"^(#{20,}.*|# ?%%.*)$")
ADORNMENT_LINE = re.compile(r"^([=\-~^\"'`#*+_.:<>])\1+\s*$")
WIDTH = 79


def folder_for(app):
    return Path(app.srcdir) / f"tutorials_{app.config.language}"


def catalog(srcdir, language, docname):
    """{English message: translation} of one document's catalog."""
    path = Path(srcdir) / "locale" / language / "LC_MESSAGES" / f"{docname}.po"
    if not path.is_file():
        return {}
    with path.open("rb") as handle:
        messages = read_po(handle, locale=language)
    # A translation that renames a section reference ends in the marker with
    # which Sphinx accepts that its reference text differs from the English;
    # the reader of a download must not see it.
    return {
        str(message.id): parse_noqa(str(message.string))[0]
        for message in messages
        if message.id and message.string and not message.fuzzy
    }


# -- Where the prose is ------------------------------------------------------


def prose_regions(lines, source_text):
    """[(first line, last line, prefix)] of the prose: docstring and comments."""
    tree = ast.parse(source_text)
    regions = []
    docstring = tree.body[0] if tree.body else None
    if (
        isinstance(docstring, ast.Expr)
        and isinstance(docstring.value, ast.Constant)
        and isinstance(docstring.value.value, str)
    ):
        # The lines between the opening and the closing quotes.
        regions.append((docstring.lineno, docstring.end_lineno - 2, ""))
    index = 0
    while index < len(lines):
        if COMMENT_BLOCK_START.match(lines[index]):
            start = index + 1
            end = start
            while end < len(lines) and lines[end].startswith("#"):
                end += 1
            if end > start:
                regions.append((start, end - 1, "#"))
            index = end
        else:
            index += 1
    return regions


def _strip(line, prefix):
    if not prefix:
        return line
    return line[2:] if line.startswith("# ") else line[1:]


def _unstrip(line, prefix):
    if not prefix:
        return line
    return f"# {line}" if line else "#"


# -- Replacing messages ---------------------------------------------------------


def display_width(text):
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _pattern(message):
    return re.compile(r"\s+".join(re.escape(word) for word in message.split()))


def _wrap(text, indent, first_column):
    """Wrap at spaces (never inside a run of Chinese, never after a reST
    ``\\ `` escape) to about WIDTH columns."""
    lines, current, column = [], "", first_column
    for piece in re.findall(r"(?:\\ |\S)+\s*", text):
        width = display_width(piece.rstrip())
        if current and column + width > WIDTH:
            lines.append(current.rstrip())
            current, column = "", indent
        current += piece
        column += display_width(piece)
    lines.append(current.rstrip())
    return ("\n" + " " * indent).join(lines)


LIST_MARKER = re.compile(r"^\s*(?:[*+\-]|#\.|\d+\.)\s+$")


def _line_start(text, start):
    """What precedes ``start`` on its line, and whether that is only
    indentation or a list marker (the text at ``start`` begins the line)."""
    leading = text[text.rfind("\n", 0, start) + 1 : start]
    return leading, leading.strip() == "" or bool(LIST_MARKER.match(leading))


def translate_text(text, messages, escape=False):
    """(translated text, messages used) for one region of prose.

    ``messages`` are (English, translation) pairs in document order; each is
    looked for after the previous one found. With ``escape`` (the module
    docstring, a Python string literal), backslashes are doubled so that the
    docstring's value holds the translation as written.
    """
    cursor = 0
    used = []
    for english, translation in messages:
        match = _pattern(english).search(text, cursor)
        if match is None:
            continue
        if escape:
            translation = translation.replace("\\", "\\\\")
        leading, begins_line = _line_start(text, match.start())
        if begins_line:
            replacement = _wrap(translation, len(leading), display_width(leading))
        else:
            replacement = translation  # a directive's argument: one line
        text = text[: match.start()] + replacement + text[match.end() :]
        cursor = match.start() + len(replacement)
        used.append(english)
    return _fix_adornments(text), used


def translate_repeats(text, translations, escape=False):
    """Translate the further occurrences of messages that occur twice.

    A catalog holds each message once, so ``translate_text`` replaces only
    its first occurrence. Later ones are replaced here where they fill whole
    lines: a paragraph or list item of their own (a table that links to the
    same section twice), never a part of a longer sentence.
    """
    for english, translation in translations.items():
        if english == translation:
            continue
        if escape:
            translation = translation.replace("\\", "\\\\")
        start = 0
        while match := _pattern(english).search(text, start):
            leading, begins_line = _line_start(text, match.start())
            if begins_line and text[match.end() : match.end() + 1] in ("", "\n"):
                replacement = _wrap(translation, len(leading), display_width(leading))
                text = text[: match.start()] + replacement + text[match.end() :]
                start = match.start() + len(replacement)
            else:
                start = match.end()
    return text


def _fix_adornments(text):
    """Make every heading's over- and underline as wide as its title."""
    lines = text.split("\n")
    for index in range(1, len(lines)):
        line, title = lines[index].strip(), lines[index - 1].strip()
        if not ADORNMENT_LINE.match(line) or not title or ADORNMENT_LINE.match(title):
            continue
        wide = line[0] * max(display_width(title), len(line))
        if index >= 2 and lines[index - 2].strip() == line:
            lines[index - 2] = wide  # the overline
        lines[index] = wide
    return "\n".join(lines)


def translate_script(source_text, translations):
    """(the script with its prose translated, messages not found in it)."""
    lines = source_text.split("\n")
    remaining = list(translations.items())
    replacements = []
    for first, last, prefix in prose_regions(lines, source_text):
        region = "\n".join(_strip(line, prefix) for line in lines[first : last + 1])
        translated, used = translate_text(region, remaining, escape=not prefix)
        translated = translate_repeats(translated, translations, escape=not prefix)
        remaining = [item for item in remaining if item[0] not in set(used)]
        new_lines = [_unstrip(line, prefix) for line in translated.split("\n")]
        replacements.append((first, last, new_lines))
    # From the bottom up, so that the line numbers of earlier regions hold.
    for first, last, new_lines in reversed(replacements):
        lines[first : last + 1] = new_lines
    return "\n".join(lines), [english for english, _ in remaining]


# -- The downloads -------------------------------------------------------------


def make_downloads(app):
    """Write every example's translated script, notebook and the zip files."""
    import notebooks
    import verified_stamp

    language = app.config.language
    target = folder_for(app)
    target.mkdir(exist_ok=True)
    scripts, notebook_files = [], []
    for docname, (source, folder) in verified_stamp._examples(app).items():
        translations = catalog(app.srcdir, language, docname)
        text, _ = translate_script(source.read_text(encoding="utf-8"), translations)
        script = target / source.name
        _write(script, text)
        try:
            notebook = notebooks.build(
                app, source, folder, text_source=script, translations=translations
            )
        except Exception as error:  # noqa: BLE001 - reported as a build warning
            logger.warning(
                "%s: no translated notebook: %s",
                source.name,
                error,
                location=docname,
                type="translated_downloads",
            )
            continue
        notebook_file = script.with_suffix(".ipynb")
        _write(notebook_file, notebooks.dumps(notebook))
        scripts.append(script)
        notebook_files.append(notebook_file)
    gallery = app.config.sphinx_gallery_conf["gallery_dirs"]
    gallery = gallery if isinstance(gallery, str) else gallery[0]
    for files, kind in [(scripts, "python"), (notebook_files, "jupyter")]:
        archive = target / f"{gallery}_{kind}.zip"
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zipped:
            for path in sorted(files):
                # A fixed date: the same files make the same archive.
                entry = zipfile.ZipInfo(path.name, date_time=(2026, 1, 1, 0, 0, 0))
                zipped.writestr(entry, path.read_bytes(), zipfile.ZIP_DEFLATED)
        if not archive.is_file() or archive.read_bytes() != buffer.getvalue():
            archive.write_bytes(buffer.getvalue())


def _write(path, text):
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def point_downloads(app, doctree):
    """Make the page's download links fetch the translated files."""
    target = folder_for(app)
    relative = "/" + target.relative_to(app.srcdir).as_posix()
    for node in doctree.findall(nodes.Element):
        if node.tagname != "download_reference":
            continue
        name = Path(node["reftarget"]).name
        if (target / name).is_file():
            node["reftarget"] = f"{relative}/{name}"
