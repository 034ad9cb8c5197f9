"""The console's Volumes screen in a real browser against a real hub (loopback trust off, so the console
signs in with the owner token): the owner makes a volume from a folder, mounts it on a role, sees an agent
spawned afterwards mount it, is refused (next to the button) removing it while that VM runs, and is refused
(next to the form) a second volume of the same name; unmounts the role. axe-core finds no serious or
critical violation and the browser logs no error.

The set-up (the hub, the sign-in, axe) is tests/browser/test_console.py's."""

from __future__ import annotations

from support.agentside import AgentSide
from support.deadline import until

from agentplaza.commands import agents as ac

from .test_console import prepared
from .test_console_governance import (  # noqa: F401 - the fixture
    AXE,
    SHOTS_ENV,
    SHOWN_MS,
    axe_violations,
    console_hub,
    owner_http,
    settled,
    sign_in,
    watch_errors,
)


def test_the_owner_makes_mounts_and_is_refused_removing_a_mounted_volume(browser, console_hub, tmp_path):  # noqa: F811
    from playwright.sync_api import expect

    shots = prepared(tmp_path)
    h = console_hub
    http = owner_http(h)
    src = tmp_path / "corpus"
    src.mkdir()
    (src / "hello.txt").write_text("shared data\n")

    context = browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        page = context.new_page()
        errors = watch_errors(page)
        sign_in(page, h)
        page.get_by_role("link", name="Volumes", exact=True).click()
        settled(page)
        expect(page.get_by_text("No volumes yet.")).to_be_visible()

        made = page.get_by_role("form", name="New volume")
        made.get_by_label("Name").fill("corpus")
        made.get_by_label("Source").fill(str(src))
        made.get_by_role("button", name="Create volume").click()
        expect(made.get_by_role("status")).to_contain_text("Volume corpus made")
        volumes = page.get_by_role("table", name="Volumes", exact=True)
        expect(volumes).to_contain_text("corpus")
        expect(volumes).to_contain_text(str(src))
        expect(volumes).to_contain_text("MiB")

        # The section drawn again (another change of the volumes, made outside the console) keeps the
        # message next to the form: a reload never wipes it.
        again = drawn(page, "Volumes")
        assert http.put("/v1/volumes/roles/builder", json={"volumes": ["corpus"]}).status_code == 200
        page.wait_for_function(f"() => performance.getEntriesByName('apz:drawn Volumes').length > {again}")
        expect(made.get_by_role("status")).to_contain_text("Volume corpus made")
        again = drawn(page, "Volumes")
        assert http.delete("/v1/volumes/roles/builder").status_code == 200
        page.wait_for_function(f"() => performance.getEntriesByName('apz:drawn Volumes').length > {again}")

        # What the owner is typing survives the section drawn again by a change made elsewhere: the
        # fields' values (an input, a select), the focused field and its selection; the form still sends.
        mount = page.get_by_role("form", name="Mount volumes on a role")
        mount.get_by_label("Role").select_option("researcher")
        name_f, source_f = made.get_by_label("Name"), made.get_by_label("Source")
        name_f.fill("corpus")
        source_f.fill(str(src))
        source_f.evaluate("(el) => el.setSelectionRange(2, 5)")
        again, roles_again = drawn(page, "Volumes"), drawn(page, "Roles")
        assert http.put("/v1/volumes/roles/builder", json={"volumes": ["corpus"]}).status_code == 200
        page.wait_for_function(f"() => performance.getEntriesByName('apz:drawn Volumes').length > {again}")
        page.wait_for_function(f"() => performance.getEntriesByName('apz:drawn Roles').length > {roles_again}")
        expect(page.get_by_role("table", name="Roles and their volumes")).to_contain_text("corpus")
        expect(name_f).to_have_value("corpus")
        expect(source_f).to_have_value(str(src))
        expect(source_f).to_be_focused()
        assert source_f.evaluate("(el) => [el.selectionStart, el.selectionEnd]") == [2, 5]
        expect(mount.get_by_label("Role")).to_have_value("researcher")
        again = drawn(page, "Volumes")
        assert http.delete("/v1/volumes/roles/builder").status_code == 200
        page.wait_for_function(f"() => performance.getEntriesByName('apz:drawn Volumes').length > {again}")
        expect(source_f).to_be_focused()
        expect(name_f).to_have_value("corpus")

        # The same name again (sent with Enter from the kept field): refused next to the form, nothing made.
        source_f.press("Enter")
        expect(made.get_by_role("alert")).to_contain_text("volume_exists")
        assert len(http.get("/v1/volumes").json()["volumes"]) == 1

        mount = page.get_by_role("form", name="Mount volumes on a role")
        mount.get_by_label("Role").select_option("researcher")
        mount.get_by_label("Volume 1").select_option("corpus")
        roles_drawn = drawn(page, "Roles")
        mount.get_by_role("button", name="Mount").click()
        expect(mount.get_by_role("status")).to_contain_text("Role researcher mounts corpus")
        expect(page.get_by_role("table", name="Roles and their volumes")).to_contain_text("corpus")
        # The mount's own event draws the Roles section again: the message stays.
        page.wait_for_function(f"() => performance.getEntriesByName('apz:drawn Roles').length > {roles_drawn}")
        expect(mount.get_by_role("status")).to_contain_text("Role researcher mounts corpus")
        assert axe_violations(page) == []
        page.screenshot(path=str(shots / "volumes.png"), full_page=True)

        # An agent spawned now mounts it (a second writer on the hub's store: this hub runs no node).
        with AgentSide(h) as side:
            done = ac.spawn(side.cmds, side.cmds.context("owner"), "researcher")
            (cid,) = done.value
            until("the hub to fold the spawn",
                  lambda: http.get("/v1/hub").json()["projections_at"] >= done.positions[-1])
        expect(volumes).to_contain_text(f"@{cid}")

        page.get_by_role("button", name="Remove volume corpus").click()
        page.get_by_role("dialog").get_by_role("button", name="Remove").click()
        note = page.get_by_role("table", name="Volumes", exact=True).get_by_role("alert")
        expect(note).to_contain_text("volume_in_use")
        expect(note).to_contain_text(str(cid))
        assert [v["name"] for v in http.get("/v1/volumes").json()["volumes"]] == ["corpus"]

        page.get_by_role("button", name="Unmount the volumes of researcher").click()
        expect(page.get_by_role("table", name="Roles and their volumes")).not_to_contain_text("corpus")
        roles = {r["role"]: r["volumes"] for r in http.get("/v1/volumes/roles").json()["roles"]}
        assert roles["researcher"] == []
        assert axe_violations(page) == []
        assert errors == [], errors
    finally:
        context.close()
        http.close()


def drawn(page, section: str) -> int:
    """How many times the console has drawn this live section (frame.js marks each draw)."""
    return page.evaluate("(name) => performance.getEntriesByName(name).length", f"apz:drawn {section}")
