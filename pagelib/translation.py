"""A page's prose in another language: catalogs in, translated script out.

The downloads of a translated page (``_ext/translated_downloads.py``) are the
English script with each prose message replaced by its translation from the
page's catalog (``locale/<language>/LC_MESSAGES/tutorials/<name>.po``); the
code is left as it is. A message is found in the script's prose (the module
docstring and the comment blocks after ``# %%``) by its words, whatever the
line breaks and indentation between them, in document order; the translation
is wrapped to the same indentation, and a retitled heading gets an underline
as wide as its new text. Strings in, strings out: no Sphinx here.
"""

import ast
import re
import unicodedata

from babel.messages.pofile import read_po
from sphinx.transforms.i18n import parse_noqa

from pagelib import layout

COMMENT_BLOCK_START = re.compile(r"^(#{20,}.*|# ?%%.*)$")
ADORNMENT_LINE = re.compile(r"^([=\-~^\"'`#*+_.:<>])\1+\s*$")
WIDTH = 79


def catalog(srcdir, language, docname):
    """{English message: translation} of one document's catalog."""
    path = layout.catalog_path(srcdir, language, docname)
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


def _uncomment(line, in_comment):
    """A prose line without its "# " when it is a comment line."""
    if not in_comment:
        return line
    return line[2:] if line.startswith("# ") else line[1:]


def _comment(line, in_comment):
    """A prose line made a comment line again when it was one."""
    if not in_comment:
        return line
    return f"# {line}" if line else "#"


# -- Replacing messages ---------------------------------------------------------


def display_width(text):
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def message_pattern(message):
    return re.compile(r"\s+".join(re.escape(word) for word in message.split()))


def wrap(text, indent, first_column):
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


def line_start(text, start):
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
        match = message_pattern(english).search(text, cursor)
        if match is None:
            continue
        if escape:
            translation = translation.replace("\\", "\\\\")
        leading, begins_line = line_start(text, match.start())
        if begins_line:
            replacement = wrap(translation, len(leading), display_width(leading))
        else:
            replacement = translation  # a directive's argument: one line
        text = text[: match.start()] + replacement + text[match.end() :]
        cursor = match.start() + len(replacement)
        used.append(english)
    return fix_adornments(text), used


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
        while match := message_pattern(english).search(text, start):
            leading, begins_line = line_start(text, match.start())
            if begins_line and text[match.end() : match.end() + 1] in ("", "\n"):
                replacement = wrap(translation, len(leading), display_width(leading))
                text = text[: match.start()] + replacement + text[match.end() :]
                start = match.start() + len(replacement)
            else:
                start = match.end()
    return text


def fix_adornments(text):
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
        in_comment = prefix == "#"  # a comment block, not the docstring
        region = "\n".join(
            _uncomment(line, in_comment) for line in lines[first : last + 1]
        )
        translated, used = translate_text(region, remaining, escape=not in_comment)
        translated = translate_repeats(translated, translations, escape=not in_comment)
        remaining = [item for item in remaining if item[0] not in set(used)]
        new_lines = [_comment(line, in_comment) for line in translated.split("\n")]
        replacements.append((first, last, new_lines))
    # From the bottom up, so that the line numbers of earlier regions hold.
    for first, last, new_lines in reversed(replacements):
        lines[first : last + 1] = new_lines
    return "\n".join(lines), [english for english, _ in remaining]


# Names that stay in Latin letters in Chinese prose: products, projects,
# people's tools and API names. Identifiers (torch.compile, custom_op, CUDA,
# PyTorch: dotted, underscored, all capitals or with a capital inside) are
# recognised as names without being listed.
PROPER_NAMES = {
    "Triton", "Python", "Jupyter", "Sphinx", "Gallery", "Theme", "Pillow",
    "Matplotlib", "NumPy", "Inductor", "Dynamo", "AOTAutograd", "Linux",
    "Windows", "Google", "Colab", "Ctrl", "Chromium", "Intel", "Apple",
    "Copyright", "English", "Markdown", "GitHub", "Playwright", "Bash",
}  # fmt: skip
# A Latin word, or an identifier with dots, colons or underscores inside.
LATIN_TOKEN = re.compile(r"[A-Za-z0-9_]+(?:[.:'\u2019\-][A-Za-z0-9_]+)*")
# What may stand between two words of one English phrase.
PHRASE_GAP = re.compile(r"[\s,;!?()\"\u201c\u201d\u2018\u2019/\u2013\u2014]*")
# A word of English prose: lower case or capitalised letters, no digits.
ENGLISH_WORD = re.compile(r"[A-Za-z][a-z]*(?:['\u2019\-][a-z]+)*")
# This many English words in a row are a sentence, not a glossed term.
ENGLISH_RUN = 3


def english_phrases(text):
    """Runs of ENGLISH_RUN or more English words in a row in ``text``."""
    phrases, run, end = [], [], None
    for match in LATIN_TOKEN.finditer(text):
        word = match.group()
        is_english = (
            ENGLISH_WORD.fullmatch(word) is not None
            and word not in PROPER_NAMES
            and not (len(word) > 1 and word.isupper())
        )
        joined = end is not None and PHRASE_GAP.fullmatch(text[end : match.start()])
        if not (is_english and (joined or not run)):
            if len(run) >= ENGLISH_RUN:
                phrases.append(" ".join(run))
            run = [word] if is_english else []
        else:
            run.append(word)
        end = match.end()
    if len(run) >= ENGLISH_RUN:
        phrases.append(" ".join(run))
    return phrases


def english_in_translation(message):
    """English phrases of a translated message outside its inline literals,
    roles and references: what a reader would see as untranslated prose."""
    text = re.sub(r"``.*?``", " ", message, flags=re.S)
    text = re.sub(r"(?::[\w:+-]+:)?`[^`]*`_{0,2}", " ", text)
    text = re.sub(r"\|[^|]+\|", " ", text)
    return english_phrases(text)


# -- Spaces beside links whose text is Chinese -----------------------------------

# An inline literal (skipped), or interpreted text: a role (``:ref:`x```), a
# hyperlink reference (```text <url>`_``, ```title`_``) or default-role text.
INLINE = re.compile(
    r"``.+?``|(?::(?P<role>[\w.+-]+(?::[\w.+-]+)*):)?`(?P<body>[^`]+)`(?P<ref>_{0,2})",
    re.S,
)
EXPLICIT_TARGET = re.compile(r"(.*?)\s*<([^<>]+)>", re.S)


def is_wide(character):
    """A Chinese character or full-width punctuation: no space goes beside it."""
    return unicodedata.east_asian_width(character) in "WF"


def visible_text(rst):
    """What a reader sees of a piece of inline reST: literals, roles and
    emphasis without their markup, and no escaped spaces."""
    text = re.sub(r"``(.+?)``", r"\1", rst, flags=re.S)
    text = re.sub(r"(?::[\w.+-]+(?::[\w.+-]+)*:)?`([^`]*)`_{0,2}", r"\1", text)
    text = text.replace("\\ ", "").replace("**", "").replace("*", "")
    text = re.sub(r"[\u2018\u2019]", "'", text)
    return re.sub(r"[\u201c\u201d]", '"', text)


def _resolved_doc(docname, target):
    """A ``:doc:`` target as a docname: absolute (``/index``) or relative to
    the folder of ``docname``."""
    if target.startswith("/") or docname is None:
        return target.lstrip("/")
    folder = docname.rpartition("/")[0]
    return f"{folder}/{target}" if folder else target


def link_parts(match):
    """``(role, text, target)`` of a match of ``INLINE``: ``role`` None for a
    hyperlink reference or default-role text, ``text`` None where no text is
    written before a ``<target>``; None for an inline literal."""
    body = match.group("body")
    if body is None:
        return None
    explicit = EXPLICIT_TARGET.fullmatch(body)
    if explicit:
        return match.group("role"), explicit.group(1), explicit.group(2).strip()
    return match.group("role"), None, body.strip()


def link_text(match, titles, docname=None):
    """The text a link of ``INLINE`` shows, or None when it is no link (a
    literal, a code role) or its target's title is not in ``titles``:
    ``{("ref", label) or ("doc", docname): the title as the edition shows it}``."""
    parts = link_parts(match)
    if parts is None:
        return None  # an inline literal
    role, text, target = parts
    if role is None:  # a hyperlink reference shows its text
        if not match.group("ref"):
            return None
        return target if text is None else text
    if text:
        return text
    kind = role.rpartition(":")[2]
    if kind == "ref":
        return titles.get(("ref", target.lower()))
    if kind == "doc":
        return titles.get(("doc", _resolved_doc(docname, target)))
    return None  # a code role: its text is the name


def spaces_beside_chinese_links(message, titles, docname=None):
    """The links of a translated message whose text shows Chinese next to a
    visible space that has Chinese on its other side: ``安装 `它的 wheel 包
    <…>`_`` renders "安装 它的 wheel 包", a gap Chinese typesetting avoids.
    Write ``\\ `` there instead (``安装\\ `它的 wheel 包 <…>`_``), or reword."""
    found = []
    for match in INLINE.finditer(message):
        text = link_text(match, titles, docname)
        shown = visible_text(text).strip() if text else ""
        if not shown:
            continue
        before = re.search(r"([^\s\\])\s+$", message[: match.start()])
        after = re.match(r"\s+(\S)", message[match.end() :])
        if (before and is_wide(before.group(1)) and is_wide(shown[0])) or (
            after and is_wide(after.group(1)) and is_wide(shown[-1])
        ):
            found.append(shown)
    return found


# -- Where a message's links and names point -----------------------------------


def link_targets(message):
    """Where the links and cross-references of a piece of inline reST point,
    as a sorted list of ``(role, target)``: ``("ref", label)``, ``("doc",
    name)``, ``("py:func", name)``, ``("url", address)``. A translation must
    point where its English does; the text shown may change, the target may
    not (a fuzzy guess can keep another page's label)."""
    found = []
    for match in INLINE.finditer(message):
        parts = link_parts(match)
        if parts is None:
            continue  # an inline literal
        role, text, target = parts
        if role is None:
            if match.group("ref") and text is not None:
                found.append(("url", target))
            continue  # default-role text, or a reference to a named target
        kind = role.removeprefix("py:")
        if kind in ("ref", "term", "numref"):
            target = target.lower()
        found.append((kind, target.lstrip("~!.")))
    return sorted(found)
