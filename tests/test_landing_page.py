"""The landing page's cards, read from the rendered HTML.

Each page of the course has one card, in course order, showing the page's
title, its one-line summary from the course outline, the floor the version
matrix measured for it, a link to the page, and a thumbnail drawn by that page
itself.
"""

import hashlib
from urllib.parse import urlsplit

import pytest
from bs4 import BeautifulSoup
from PIL import Image

from pagelib import contract, course, records
from tests.support.helpers import EXAMPLES, GALLERY_DIR, REPO

COURSE_ORDER = sorted(EXAMPLES, key=lambda name: course.CourseOrder("")(f"{name}.py"))


@pytest.fixture(scope="module")
def cards(site):
    soup = BeautifulSoup((site.html / "index.html").read_text(), "html.parser")
    found = []
    for card in soup.select("div.tutorial-card"):
        link = card.select_one("a.sd-stretched-link")
        image = card.select_one("img.sd-card-img-top")
        found.append(
            {
                "title": card.select_one(".sd-card-title").get_text(" ", strip=True),
                "summary": card.select_one(".sd-card-body p.sd-card-text").get_text(
                    " ", strip=True
                ),
                "footer": card.select_one(".sd-card-footer").get_text(" ", strip=True),
                "href": link["href"] if link else None,
                "image": image["src"] if image else None,
            }
        )
    return found


def test_one_card_per_page_in_course_order(cards):
    linked = [urlsplit(card["href"]).path for card in cards]
    assert linked == [f"{GALLERY_DIR}/{name}.html" for name in COURSE_ORDER]


SMART_QUOTES = str.maketrans("\u2018\u2019\u201c\u201d", "''\"\"")


@pytest.mark.parametrize("name", EXAMPLES)
def test_card_shows_the_page_title_summary_and_measured_floor(cards, name):
    step = COURSE_ORDER.index(name)
    card = cards[step]
    source = REPO / "advanced" / f"{name}.py"
    floor = records.read(REPO, source).floor
    assert floor, f"{name} has no measured floor"
    # Sphinx sets quotes and apostrophes typographically, in the title as in
    # the summary.
    assert (
        card["title"].translate(SMART_QUOTES) == contract.read_script(source)["title"]
    )
    typeset = card["summary"].translate(SMART_QUOTES)
    assert typeset == course.COURSE[f"{name}.py"]
    assert card["footer"] == f"Part {step + 1} · PyTorch {floor} or later"


def test_every_card_has_a_thumbnail_of_its_own(site, cards):
    # Every page draws (see test_site_build), so Sphinx-Gallery makes each
    # thumbnail from the page's own figure; no two cards may show the same
    # picture, as they would if pages fell back to the generic one.
    digests = {}
    for card in cards:
        assert card["image"], f"no thumbnail on the card for {card['href']}"
        with Image.open(site.html / card["image"]) as image:
            pixels = image.convert("RGBA").tobytes()
        digest = hashlib.sha256(pixels).hexdigest()
        digests.setdefault(digest, []).append(card["href"])
    shared = [hrefs for hrefs in digests.values() if len(hrefs) > 1]
    assert not shared, f"cards sharing one thumbnail: {shared}"
