"""The API reference extension's doctree rewrites (_ext/api_reference.py)."""

from types import SimpleNamespace

import api_reference
from docutils.core import publish_doctree

DOCSTRING = (
    "The ctx is `the same ctx object <context_method_mixins>`_ as in Function.\n"
    "See `the forum <https://discuss.pytorch.org/>`_ and `below`_.\n\n"
    ".. _below:\n\nBelow.\n"
)


def links(doctree):
    return [
        node.get("refuri") or "#" + node.get("refid", "")
        for node in doctree.findall(lambda n: n.tagname == "reference")
    ]


def rewritten(docname):
    doctree = publish_doctree(DOCSTRING)
    app = SimpleNamespace(env=SimpleNamespace(docname=docname))
    api_reference.relative_links_as_text(app, doctree)
    return doctree


def test_a_docstring_link_to_pytorchs_own_docs_keeps_its_text_unlinked():
    doctree = rewritten("api/torch.library.register_autograd")
    assert links(doctree) == ["https://discuss.pytorch.org/", "#below"]
    assert "the same ctx object as in Function" in doctree.astext()


def test_pages_outside_the_api_reference_are_left_alone():
    assert "context_method_mixins" in links(rewritten("tutorials/python_custom_ops"))


def resolved_with(monkeypatch, found):
    """Whether resolving ``found`` imported cpp_extension, and the entries."""
    imported = []
    monkeypatch.setattr(
        api_reference.hooks, "quietly_import_cpp_extension", lambda: imported.append(1)
    )
    used, _aliases = api_reference._entries(SimpleNamespace(), found)
    return bool(imported), used


def test_pages_that_name_nothing_of_torch_do_not_import_it(monkeypatch):
    assert resolved_with(monkeypatch, {"json.dumps": ["tutorials/a"]}) == (
        False,
        {"json.dumps": ["tutorials/a"]},
    )


def test_a_torch_name_is_resolved_after_importing_cpp_extension_quietly(monkeypatch):
    imported, used = resolved_with(monkeypatch, {"torch.library.opcheck": ["t/a"]})
    assert imported and used == {"torch.library.opcheck": ["t/a"]}


def test_a_constant_does_not_show_the_docstring_of_its_type():
    for value in ((1, 2), "/usr/local/cuda"):
        lines = (type(value).__doc__ or "").splitlines()
        api_reference.without_type_docstring(None, "data", "x", value, {}, lines)
        assert lines == []
    # Its own documentation (a ``#:`` comment) stays, and so does a class's.
    lines = ["The checks, in order."]
    api_reference.without_type_docstring(None, "data", "x", (1,), {}, lines)
    assert lines == ["The checks, in order."]
    lines = (tuple.__doc__ or "").splitlines()
    api_reference.without_type_docstring(None, "class", "x", tuple, {}, lines)
    assert lines
