"""What a tutorial page must look like, in one place.

Every page under ``advanced/`` follows the template
``docs/dev/adding-a-page.md`` describes. The parts other code reads back are
defined here, once:

* the first cell's floor check, which stops on an older PyTorch with a
  one-line "needs PyTorch X.Y or later" message (``FLOOR_CHECK``,
  ``BELOW_FLOOR``, ``declared_floors``);
* the devices line the first cell prints (``DEVICES_LINE``,
  ``devices_in_output``);
* the "PyTorch X.Y or later" bullet of the Prerequisites card
  (``STATED_FLOOR``, ``stated_floors``);
* the docstring's title, introductory sentence (the landing card's text),
  Prerequisites card and Checklist admonition (``read_script``);
* the page's identity, ``code_digest``: a digest of its code as
  Sphinx-Gallery splits it, so that editing prose, a heading, a comment or a
  translation leaves the version matrix's records current, and editing code
  (string literals included: C++ and Triton sources are code) does not.
"""

import ast
import hashlib
import io
import re
import tokenize
from pathlib import Path

from sphinx_gallery.py_source_parser import split_code_and_text_blocks

# The first cell's check, as docs/dev/adding-a-page.md spells it: group 1
# and 2 are the (major, minor) it compares with, group 3 the release its
# message names.
FLOOR_CHECK = re.compile(
    r"^if tuple\(int\(part\) for part in torch\.__version__\.split\(\"\.\"\)\[:2\]\)"
    r" < \((\d+), (\d+)\):\n\s+sys\.exit\(.*needs PyTorch (\d+\.\d+) or later",
    re.M,
)
# The one line a page prints when it stops below its floor.
BELOW_FLOOR = re.compile(r"needs PyTorch (\d+\.\d+) or later")
# The line every first cell prints: the release and the devices it used.
DEVICES_LINE = re.compile(
    r"^PyTorch (\S+?); devices (?:exercised|present): (\[.*?\])", re.M
)
# The line a page prints for each PyTorch behaviour it tracks ("Sharp Edges"):
# whether the behaviour is still there in the release that ran it.
EDGE_LINE = re.compile(
    r"^sharp edge ([a-z0-9][a-z0-9-]*): (present|gone|not applicable)\b", re.M
)
# The Prerequisites card's floor bullet.
STATED_FLOOR = re.compile(r"^\s*[*\-+]\s+PyTorch\s+(\d+\.\d+)\s+or\s+later\b", re.M)


def declared_floors(source_text):
    """The floor the first cell checks and the one its message names, as
    ("2.7", "2.7"), or (None, None) without a check."""
    match = FLOOR_CHECK.search(source_text)
    if not match:
        return None, None
    return f"{match.group(1)}.{match.group(2)}", match.group(3)


def disable_floor_check(source_text):
    """The page with its floor check comparing against (0, 0), so that it runs
    on any release (``make matrix PROBE=1``)."""
    return FLOOR_CHECK.sub(
        lambda m: m.group(0).replace(f"({m.group(1)}, {m.group(2)})", "(0, 0)"),
        source_text,
    )


def stated_floors(source_text):
    """Every "PyTorch X.Y or later" bullet the page states."""
    return STATED_FLOOR.findall(source_text)


def devices_in_output(stdout):
    """(torch version, [devices]) from a page's printed devices line, or
    (None, None)."""
    match = DEVICES_LINE.search(stdout)
    if not match:
        return None, None
    return match.group(1), ast.literal_eval(match.group(2))


def edges_in_output(stdout):
    """{edge: "present" | "gone" | "not applicable"} from a page's edge lines,
    in the order printed."""
    return {match.group(1): match.group(2) for match in EDGE_LINE.finditer(stdout)}


def _without_comments(code):
    """The code with its comments and blank lines removed, lines right-stripped.

    Comments are found with ``tokenize``, so a ``#`` inside a string (a C++
    include, a URL) is kept; code that does not tokenize is kept whole.
    """
    lines = code.splitlines()
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        tokens = []
    for token in reversed(tokens):
        if token.type == tokenize.COMMENT:
            (row, column), _end = token.start, token.end
            lines[row - 1] = lines[row - 1][:column]
    return [line.rstrip() for line in lines if line.strip()]


def code_digest(source):
    """The identity of a page's code: 16 hex digits.

    The code blocks Sphinx-Gallery splits the script ``source`` into (a path),
    without comments, blank lines or trailing spaces, in order. Everything
    else (the docstring, text blocks, comments) is prose.
    """
    _config, blocks = split_code_and_text_blocks(str(source))
    digest = hashlib.sha256()
    for block in blocks:
        if block.type == "code":
            digest.update("\n".join(_without_comments(block.content)).encode())
            digest.update(b"\n\0\n")
    return digest.hexdigest()[:16]


def page_size(source):
    """(prose words, code lines) of a page: the words of its docstring and
    text blocks, and the non-blank lines of its code blocks without comments."""
    _config, blocks = split_code_and_text_blocks(str(source))
    words = sum(len(b.content.split()) for b in blocks if b.type == "text")
    lines = sum(len(_without_comments(b.content)) for b in blocks if b.type == "code")
    return words, lines


# -- The docstring: title, summary, Prerequisites card, checklist ------------

UNDERLINE = re.compile(r"^([=\-~^\"'`#*+_.:])\1+\s*$")
# A sentence ends at . ! or ? followed by a space and a capital letter, except
# after an abbreviation such as "e.g.".
SENTENCE_END = re.compile(r"(?<!\be\.g)(?<!\bi\.e)(?<!\betc)(?<!\bvs)[.!?](?=\s+[A-Z])")


def _first_line_number(tree):
    node = tree.body[0] if tree.body else None
    return node.lineno if node is not None else 1


def read_script(path):
    """The card fields of one example script, and the problems found."""
    source = Path(path).read_text(encoding="utf-8")
    tree = ast.parse(source)
    docstring = ast.get_docstring(tree, clean=True) or ""
    lines = docstring.splitlines()
    problems = []
    title, title_line = _title(lines)
    if not title:
        problems.append("its docstring has no title")
    summary = _summary(lines, title_line)
    if not summary:
        problems.append("its docstring has no introductory paragraph under the title")
    version = None
    card = _prerequisites_card(lines)
    if card is None:
        problems.append("its docstring has no Prerequisites card")
    else:
        version = _stated_version(card)
        if version is None:
            problems.append(
                'its Prerequisites card has no "PyTorch X.Y or later" bullet'
            )
    if not re.search(r"^\.\. admonition:: Checklist$", docstring, re.M):
        problems.append("its docstring has no Checklist admonition")
    return {
        "title": title,
        "summary": summary,
        "version": version,
        "problems": problems,
        "line": _first_line_number(tree),
    }


def _title(lines):
    """(the docstring's title, its line index): the first line of text that is
    not an over- or underline; ("", None) when there is none."""
    for index, line in enumerate(lines):
        if line.strip() and not UNDERLINE.match(line.strip()):
            return line.strip(), index
    return "", None


def _summary(lines, title_line):
    """The first sentence of the paragraph that follows the title, or ""."""
    if title_line is None:
        return ""
    start = title_line + 1
    while start < len(lines) and (
        not lines[start].strip() or UNDERLINE.match(lines[start].strip())
    ):
        start += 1
    paragraph = []
    for line in lines[start:]:
        if not line.strip():
            break
        paragraph.append(line.strip())
    text = " ".join(paragraph)
    if not paragraph or text.startswith(".."):
        return ""
    match = SENTENCE_END.search(text)
    return text[: match.end()] if match else text


def _stated_version(card):
    """The "X.Y" of the Prerequisites card's "PyTorch X.Y or later" bullet."""
    match = STATED_FLOOR.search(card)
    return match.group(1) if match else None


def _prerequisites_card(lines):
    """The body of the ``grid-item-card`` titled Prerequisites, as text."""
    for i, line in enumerate(lines):
        if "grid-item-card::" in line and "Prerequisites" in line:
            indent = len(line) - len(line.lstrip())
            body = []
            for following in lines[i + 1 :]:
                stripped = following.strip()
                if stripped and len(following) - len(following.lstrip()) <= indent:
                    break
                body.append(following)
            return "\n".join(body)
    return None
