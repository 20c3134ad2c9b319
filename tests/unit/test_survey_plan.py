"""The browser survey's views (tests/support/survey_plan.py), planned on toy pages."""

from tests.support import survey_plan
from tests.support.survey_plan import DARK, FIRST, PHONE, VIEWS


def entry(body, link_title="Link to this definition"):
    """An entry page as the build writes it: the docstring block, then the
    mini-gallery's heading."""
    return (
        '<html><body><div class="api-docstring docutils container" lang="en">'
        f'<dl class="py function"><dt id="f">f<a class="headerlink" href="#f" '
        f'title="{link_title}">#</a></dt><dd>{body}</dd></dl></div>'
        '<p class="rubric">Pages that use it</p></body></html>'
    )


PAGES = {
    "index.html": "<html><body><p>Home</p></body></html>",
    "tutorials/page.html": "<html><body><p>A page</p></body></html>",
    "api/torch.a.html": entry('<p class="x">a</p>'),
    "api/torch.b.html": entry('<p class="x">b</p><table class="y"></table>'),
    "api/torch.c.html": entry("<p>c</p><pre>c</pre>"),
    "api/torch.d.html": entry('<p class="x">d</p>'),
    "zh_CN/index.html": "<html><body><p>首页</p></body></html>",
    "zh_CN/api/torch.a.html": entry('<p class="x">a</p>', "链接到此定义。"),
    "zh_CN/api/torch.b.html": entry(
        '<p class="x">b</p><table class="y"></table>', "链接到此定义。"
    ),
    "zh_CN/api/torch.c.html": entry("<p>c</p><pre>c</pre>", "链接到此定义。"),
    # Chinese smart quotes: the block differs from its English twin's.
    "zh_CN/api/torch.d.html": entry('<p class="x">&quot;d&quot;</p>', "链接"),
}


def planned():
    return survey_plan.plan(sorted(PAGES), PAGES.__getitem__)


def test_every_page_gets_the_first_view_and_pages_not_entries_all_three():
    views = planned()
    assert set(views) == set(PAGES)
    assert all(view[0] == FIRST for view in views.values())
    for page in ("index.html", "tutorials/page.html", "zh_CN/index.html"):
        assert views[page] == list(VIEWS), page


def test_the_dark_sample_holds_every_shape_of_its_editions_entries():
    views = planned()
    for edition in ("", "zh_CN/"):
        entries = [p for p in PAGES if p.startswith(f"{edition}api/")]
        every = set().union(*(survey_plan.shapes(PAGES[p]) for p in entries))
        dark = [p for p in entries if DARK in views[p]]
        seen = set().union(*(survey_plan.shapes(PAGES[p]) for p in dark))
        assert seen == every, edition
        # b holds everything a and d hold: neither is needed.
        assert f"{edition}api/torch.a.html" not in dark
        assert f"{edition}api/torch.d.html" not in dark


def test_phone_width_for_every_english_entry_and_each_chinese_one_that_differs():
    views = planned()
    assert all(PHONE in views[p] for p in PAGES if p.startswith("api/"))
    # Same block as its English twin but for the translated tooltip: the
    # English entry's phone view stands for it.
    assert views["zh_CN/api/torch.a.html"] == [FIRST]
    assert PHONE in views["zh_CN/api/torch.d.html"]
    # In the dark sample: every view.
    assert views["zh_CN/api/torch.b.html"] == list(VIEWS)


def test_the_sample_is_the_same_whatever_order_the_pages_come_in():
    shapes = {p: survey_plan.shapes(PAGES[p]) for p in PAGES if "api/" in p}
    backwards = dict(reversed(list(shapes.items())))
    assert survey_plan.covering_sample(shapes) == survey_plan.covering_sample(backwards)


def test_the_colour_sample_holds_every_shape_of_both_editions_in_each_desktop_view():
    views = planned()
    sample = survey_plan.colour_sample(views, PAGES.__getitem__)
    assert {view for _, view in sample} == {FIRST, DARK}
    for view in (FIRST, DARK):
        pages = [p for p in PAGES if view in views[p]]
        every = set().union(*(survey_plan.shapes(PAGES[p]) for p in pages))
        chosen = [p for p in pages if (p, view) in sample]
        seen = set().union(*(survey_plan.shapes(PAGES[p]) for p in chosen))
        assert seen == every, view
        # One sample for both editions: b and its Chinese twin hold the same
        # shapes, and one of them is enough; a holds nothing b does not.
        assert len({"api/torch.b.html", "zh_CN/api/torch.b.html"} & set(chosen)) == 1
        assert not {"api/torch.a.html", "zh_CN/api/torch.a.html"} & set(chosen)
    # Only pages planned for a view are sampled in it, never the phone's.
    assert all(view in views[page] for page, view in sample)
    assert ("api/torch.a.html", DARK) not in sample


def test_axe_audits_every_first_view_and_the_sample_in_dark_mode():
    views = planned()
    sample = survey_plan.colour_sample(views, PAGES.__getitem__)
    for page, planned_views in views.items():
        for view in planned_views:
            expected = view == FIRST or (view == DARK and (page, view) in sample)
            assert survey_plan.audited((page, view), sample) == expected, (page, view)
    assert any(
        DARK in v and not survey_plan.audited((p, DARK), sample)
        for p, v in views.items()
    )
