"""The Treasury journal's pages in a real browser against a real hub: the newest page first (ui.js's
PAGE_ROWS, 25), Load older adds the next page below it, an entry that arrives live pushes none of the
shown ones out (the entry that falls off the newest page stays in view), and the end says so.

The set-up (the hub, the sign-in) is tests/browser/test_console.py's."""

from __future__ import annotations

from .test_console import (  # noqa: F401 - the fixture
    console_hub,
    owner_http,
    prepared,
    settled,
    sign_in,
    watch_errors,
)

#: The journal's page (treasury.js's JOURNAL_PAGE).
PAGE = 25


def test_the_journal_pages_with_load_older_and_keeps_every_shown_entry_when_one_arrives(browser, console_hub, tmp_path):  # noqa: F811
    from playwright.sync_api import expect

    prepared(tmp_path)
    h = console_hub
    http = owner_http(h)
    for i in range(1, PAGE + 5):  # with the genesis mint, 30 entries: a page and 5 older
        r = http.post("/v1/treasury/mint", json={"amount": i, "memo": f"entry {i:02d}"})
        assert r.status_code == 200, r.text
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        page = context.new_page()
        errors = watch_errors(page)
        sign_in(page, h)
        page.goto(h.url + "/#/treasury")
        settled(page)
        journal = page.get_by_role("table", name="Journal entries")
        rows = journal.locator("tbody tr")
        expect(rows).to_have_count(PAGE)
        expect(rows.first).to_contain_text("entry 29")  # newest first
        expect(rows.last).to_contain_text("entry 05")
        card = page.get_by_role("region", name="Journal", exact=True)
        expect(card.get_by_role("button", name="Show more")).to_have_count(0)  # its pages are Load older's

        card.get_by_role("button", name="Load older").click()
        expect(rows).to_have_count(PAGE + 5)
        expect(journal).to_contain_text("entry 01")

        # A new entry, made elsewhere: it shows at the top and entry 05, now past the newest page's end,
        # stays in view.
        assert http.post("/v1/treasury/mint", json={"amount": 1, "memo": "entry 30"}).status_code == 200
        expect(rows).to_have_count(PAGE + 6)
        expect(rows.first).to_contain_text("entry 30")
        shown = journal.locator("tbody").inner_text()
        assert all(f"entry {i:02d}" in shown for i in range(1, 31)), shown

        card.get_by_role("button", name="Load older").click()
        expect(card.get_by_role("button", name="No older entries")).to_be_visible()
        expect(rows).to_have_count(PAGE + 6)
        assert not errors, errors
    finally:
        context.close()
