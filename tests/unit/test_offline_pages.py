"""_ext/offline_pages.py: nothing a page loads comes from another host."""

from pathlib import Path

import offline_pages

# The head of the sg_execution_times.rst Sphinx-Gallery 0.22.1 writes (the
# site's build, trimmed to two rows). Should a later release write its block
# otherwise, the build itself fails: check_page warns about every remote
# asset of every page, and the build treats warnings as errors.
SAMPLE = Path(__file__).parent / "samples" / "sg_execution_times.rst"


def test_computation_times_page_loses_its_cdn_scripts():
    generated = SAMPLE.read_text()
    assert "https://" in generated  # what Sphinx-Gallery writes
    source = [generated]
    offline_pages.drop_cdn_tables(None, "sg_execution_times", source)
    assert "https://" not in source[0]
    assert ".. list-table::" in source[0] and ":ref:" in source[0]
    assert source[0].endswith(generated[generated.index(".. list-table::") :])

    other = [generated]  # only the computation times pages are rewritten
    offline_pages.drop_cdn_tables(None, "tutorials/index", other)
    assert other == [generated]


def test_remote_assets_of_a_page_are_warnings(monkeypatch):
    warned = []

    class Logger:
        def warning(self, message, *args, **kwargs):
            warned.append((message % args, kwargs["location"]))

    monkeypatch.setattr(offline_pages, "logger", Logger())
    context = {
        "script_files": ["_static/local.js", "https://cdn.example.org/lib.js"],
        "css_files": ["//fonts.example.org/font.css"],
        "body": '<img src="../_images/a.png" srcset="http://x.org/b.png 2x">'
        '<a href="https://example.org/">a link is fetched only when followed</a>'
        '<link rel="stylesheet" href="https://cdn.example.org/style.css">',
    }
    offline_pages.check_page(None, "tutorials/page", "page.html", context, None)
    assert [url.split()[2] for url, _ in warned] == [
        "//fonts.example.org/font.css",
        "http://x.org/b.png",
        "https://cdn.example.org/lib.js",
        "https://cdn.example.org/style.css",
    ]
    assert {location for _, location in warned} == {"tutorials/page"}

    warned.clear()
    local = {"script_files": ["_static/local.js"], "body": '<img src="a.png">'}
    offline_pages.check_page(None, "tutorials/page", "page.html", local, None)
    assert warned == []
