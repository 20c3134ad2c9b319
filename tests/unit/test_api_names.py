"""The API reference's list of entries, from what the pages' code uses
(pagelib/api_names.py)."""

from pagelib import api_names
from pagelib.course import COURSE


def cobj(module, name, short=None, explicit=False):
    return {
        "is_class": False,
        "is_explicit": explicit,
        "module": module,
        "module_short": short or module,
        "name": name,
    }


def test_the_course_namespaces_and_only_their_public_names_count():
    assert api_names.in_course_api("torch.library.custom_op")
    assert api_names.in_course_api("torch.compile")
    assert api_names.in_course_api("torch.distributed.tensor.Shard")
    assert api_names.in_course_api("torch.utils.cpp_extension.load_inline")
    assert not api_names.in_course_api("torch.randn")
    assert not api_names.in_course_api("torch.compiler.disable")
    assert not api_names.in_course_api("torch.libraryx.thing")
    assert not api_names.in_course_api("torch.library._private")
    assert not api_names.in_course_api("torch._library.custom_ops.custom_op")


def test_a_name_is_listed_under_the_public_module_sphinx_gallery_found():
    codeobj = {
        "torch.library.custom_op": [cobj("torch.library", "custom_op")],
        # `from torch.utils import cpp_extension` then `cpp_extension.load_inline`
        "cpp_extension.load_inline": [
            cobj("torch.utils.cpp_extension", "load_inline"),
        ],
        "opcheck": [cobj("torch._library.testing", "opcheck", "torch.library")],
        "torch.randn": [cobj("torch", "randn")],
    }
    assert api_names.names_in_codeobj(codeobj) == {
        "torch.library.custom_op",
        "torch.utils.cpp_extension.load_inline",
        "torch.library.opcheck",
    }


def test_usage_lists_each_names_pages_in_course_order():
    first, second = list(COURSE)[:2]
    pages = {
        f"tutorials/{second[:-3]}": {"c": [cobj("torch.library", "custom_op")]},
        "tutorials/not_in_the_course_yet": {"c": [cobj("torch.library", "custom_op")]},
        f"tutorials/{first[:-3]}": {
            "c": [cobj("torch.library", "custom_op")],
            "o": [cobj("torch.library", "opcheck")],
        },
    }
    assert api_names.usage(pages) == {
        "torch.library.custom_op": [
            f"tutorials/{first[:-3]}",
            f"tutorials/{second[:-3]}",
            "tutorials/not_in_the_course_yet",
        ],
        "torch.library.opcheck": [f"tutorials/{first[:-3]}"],
    }


def test_an_entry_page_is_its_title_and_the_directive():
    text = api_names.entry_source("torch.compile")
    assert text == (
        "``torch.compile``\n=================\n\n.. api-entry:: torch.compile\n"
    )
    assert api_names.entry_docname("torch.compile") == "api/torch.compile"


def test_a_name_belongs_to_the_longest_namespace_holding_it():
    assert api_names.namespace_of("torch.library.opcheck") == "torch.library"
    assert (
        api_names.namespace_of("torch.distributed.tensor.Shard")
        == "torch.distributed.tensor"
    )


def test_only_the_courses_own_namespaces_are_translated():
    assert api_names.is_translated("operator_checker.check_operator")
    assert api_names.is_translated("operator_checker")
    assert not api_names.is_translated("operator_checkers.thing")
    assert not api_names.is_translated("torch.library.opcheck")


def test_the_public_api_is_all_and_the_methods_of_its_classes():
    import types

    class Report:
        """A report."""

        rows = ()  # data: no entry of its own

        def outcome(self):
            """The worst outcome."""

        @property
        def passed(self):
            return True

        def _private(self):
            pass

    module = types.ModuleType("checker")
    module.__all__ = ["Report", "CHECKS", "_hidden", "__version__"]
    module.Report, module.CHECKS = Report, ("a", "b")
    module._hidden = module.__version__ = None
    assert api_names.public_api("checker", module) == [
        "checker.CHECKS",
        "checker.Report",
        "checker.Report.outcome",
        "checker.Report.passed",
    ]
