"""The site's wording of lists, devices, sentences and floors, in the build's
language: shared by the verified stamp (``_ext/verified_stamp.py``), the
notebooks' verified line (``_ext/notebooks.py``) and the translated pages
(``_ext/translated_gallery.py``). Their words come from the extensions'
``site`` catalog (``pagelib.layout.site_catalog_path``).
"""

import re

from sphinx.locale import get_translation

from pagelib import layout

_ = get_translation(layout.SITE_CATALOG)


def join_list(items):
    """['2.7', '2.8', '2.9'] -> '2.7, 2.8, 2.9' in English, '2.7、2.8、2.9' in
    Chinese: the separator is a message of its own."""
    items = list(items)
    text = items[0] if items else ""
    for item in items[1:]:
        text = _("{first}, {second}").format(first=text, second=item)
    return text


def join_and(items):
    """['CPU', 'CUDA'] -> 'CPU and CUDA'; three or more: 'A, B and C'."""
    items = list(items)
    if len(items) < 2:
        return join_list(items)
    return _("{first} and {second}").format(
        first=join_list(items[:-1]), second=items[-1]
    )


# Full-width punctuation and CJK characters: no space is wanted next to them
# (Chinese sets no space after "：" or "。", nor between two sentences).
_NO_SPACE = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]")


def join_sentences(parts):
    """Sentences (and a leading label) joined as the language writes them:
    with a space in English, without one where either side is Chinese."""
    text = ""
    for part in parts:
        if text and not (_NO_SPACE.match(text[-1]) or _NO_SPACE.match(part[:1])):
            text += " "
        text += part
    return text


def describe_devices(devices):
    """['cpu', 'cuda'] -> 'CPU and CUDA' (the matrix's devices), translated."""
    if not devices:
        return _("no device recorded")
    return join_and(device.upper() for device in devices)


def join_devices(devices):
    """['CPU', 'NVIDIA H100 (CUDA 13.2)'] -> 'CPU and NVIDIA H100 (CUDA 13.2)'."""
    text = join_and(devices)
    if len(devices) == 1:
        text = _("{devices} (no CUDA device)").format(devices=text)
    return text


def stated_floor_pattern():
    """The Prerequisites bullet "PyTorch X.Y or later".

    It matches the page's language and, for a page whose catalog has not
    translated the bullet yet, the English source text.
    """
    wordings = {_("PyTorch {version} or later"), "PyTorch {version} or later"}
    stated = "|".join(
        re.escape(wording).replace(re.escape("{version}"), r"\d+\.\d+")
        for wording in sorted(wordings)
    )
    return re.compile(f"(?:{stated})")


def measured_floor(versions):
    return _("PyTorch {version} or later (verified on {first} to {last})").format(
        version=versions.floor, first=versions.passed[0], last=versions.passed[-1]
    )
