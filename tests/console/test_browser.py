"""The console in a real browser: headless Chromium against a real service process.

One service (SQLite, keys configured) is seeded once for the module (tests/console/
seed.py); each test gets a fresh browser context, so nothing of one sign-in leaks into
the next. Every page records script errors and Content-Security-Policy violations, and a
test fails if there were any.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from tests.support.browser import require_chromium
from tests.support.console_seed import (
    ACME,
    ADMIN,
    HOSTILE,
    Seeded,
    Writer,
    progress,
    seed,
    server_env,
)
from tests.support.processes import running_server

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = pytest.mark.process

TIMEOUT_MS = 30_000  # a loaded 2-core machine; every wait is on a condition, not a sleep

RECORD_VIOLATIONS = """
window.__problems = [];
document.addEventListener('securitypolicyviolation',
  (e) => window.__problems.push('CSP ' + e.violatedDirective + ' ' + e.blockedURI));
"""


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Seeded]]:
    require_chromium()  # no service to start when no browser will come
    path = tmp_path_factory.mktemp("console") / "eventlog.db"
    with running_server(server_env(f"sqlite+aiosqlite:///{path}")) as base:
        yield base, seed(base)


@pytest.fixture
def base(service: tuple[str, Seeded]) -> str:
    return service[0]


@pytest.fixture
def seeded(service: tuple[str, Seeded]) -> Seeded:
    return service[1]


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    context.add_init_script(RECORD_VIOLATIONS)
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(f"page error: {error}"))
    try:
        yield opened
        problems = opened.evaluate("window.__problems") or []
        assert not errors + problems, errors + problems
    finally:
        context.close()


def admin_api(base: str) -> httpx.Client:
    return httpx.Client(base_url=base, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30)


def sign_in(page: Page, base: str, key: str = ADMIN) -> None:
    page.goto(f"{base}/admin/ui/")
    page.fill("#admin-key", key)
    page.click("#login button[type=submit]")


def text_of(page: Page, selector: str) -> str:
    return page.locator(selector).inner_text()


def test_sign_in_find_a_stream_and_open_its_timeline(page: Page, base: str, seeded: Seeded) -> None:
    from playwright.sync_api import expect

    page.goto(f"{base}/admin/ui/")
    expect(page.locator("#login")).to_be_visible()
    expect(page.locator("#nav")).to_be_hidden()
    page.fill("#admin-key", ADMIN)
    page.click("#login button[type=submit]")
    expect(page.locator("#view-streams table")).to_be_visible()
    expect(page.locator("#session")).to_contain_text("admin key")
    # The key is kept for this tab only, and never as a cookie.
    assert page.evaluate("sessionStorage.getItem('mcp-eventlog.admin-key')") == ADMIN
    assert page.evaluate("document.cookie") == ""

    page.fill("#stream-search input[name=prefix]", "mcp.4f9a2c")
    page.click("#stream-search button[type=submit]")
    expect(page.locator("#view-streams tbody tr")).to_have_count(2)
    page.click("text=mcp.4f9a2c.req-17")

    first, second, third = seeded.chain("mcp.4f9a2c.req-17")
    rows = page.locator("#timeline .generation-row")
    expect(rows).to_have_count(3)
    assert [rows.nth(i).get_attribute("data-generation") for i in range(3)] == [
        first,
        second,
        third,
    ]
    assert "state-superseded" in (rows.nth(0).get_attribute("class") or "")
    assert "state-live" in (rows.nth(2).get_attribute("class") or "")
    expect(page.locator("#timeline .chain")).to_have_count(2)
    # Generation 2 kept 200 of 340 events: its evicted part is 140/200 of its retained part.
    evicted = rows.nth(1).locator(".bar-evicted").bounding_box()
    retained = rows.nth(1).locator(".bar-retained").bounding_box()
    assert evicted is not None
    assert retained is not None
    assert evicted["width"] / retained["width"] == pytest.approx(140 / 200, rel=0.03)
    assert rows.nth(0).locator(".bar-evicted").count() == 0

    rows.nth(1).hover()
    tooltip = page.locator("#tooltip")
    expect(tooltip).to_be_visible()
    expect(tooltip).to_contain_text("failover")
    expect(tooltip).to_contain_text("worker-b (pid 877)")
    expect(tooltip).to_contain_text("seq 1\u2013140")  # an en dash, as the page writes ranges

    rows.nth(2).click()
    expect(page).to_have_url(re.compile(f"#/generations/{third}$"))
    expect(page.locator("#view-generation .event-data")).to_have_count(25)
    expect(page.locator("#view-generation tbody tr").first).to_contain_text(f"{third}:1")


def test_terminal_expired_and_purged_generations_are_drawn_apart(
    page: Page, base: str, seeded: Seeded
) -> None:
    from playwright.sync_api import expect

    sign_in(page, base)
    page.goto(f"{base}/admin/ui/#/streams/globex/tools.report-builder.run-0042")
    rows = page.locator("#timeline .generation-row")
    expect(rows).to_have_count(4)
    expect(page.locator("#timeline .terminal-mark")).to_have_count(1)
    expect(rows.nth(3).locator(".terminal-mark")).to_have_count(1)

    page.goto(f"{base}/admin/ui/#/streams/acme/mcp.8d03e1.req-2")
    expect(page.locator("#timeline .bar-expired")).to_have_count(1)
    expect(page.locator("#timeline .bar-retained")).to_have_count(0)
    expect(page.locator("#timeline .row-state")).to_have_text(["expired"])

    page.goto(f"{base}/admin/ui/#/streams/globex/mcp.8d03e1.req-3")
    expect(page.locator("#timeline .bar-expired")).to_have_count(2)
    expect(page.locator("#timeline .chain")).to_have_count(1)
    expect(page.locator("#purge-stream")).to_be_disabled()  # nothing left to purge


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("not-a-key-of-this-service", "refused this key (401 unauthorized)"),
        (ACME, "no admin scope (403 forbidden)"),
    ],
)
def test_a_wrong_key_is_refused_with_a_message(
    page: Page, base: str, key: str, message: str
) -> None:
    from playwright.sync_api import expect

    sign_in(page, base, key)
    expect(page.locator("#login-status [role=alert]")).to_contain_text(message)
    expect(page.locator("#nav")).to_be_hidden()
    assert page.evaluate("sessionStorage.getItem('mcp-eventlog.admin-key')") is None


def test_explain_highlights_the_deciding_row(page: Page, base: str, seeded: Seeded) -> None:
    from playwright.sync_api import expect

    first, _second, third = seeded.chain("mcp.4f9a2c.req-17")
    sign_in(page, base)
    page.click("#nav a[data-view=explain]")
    page.fill("#explain-id", f"{first}:118")
    page.fill("#explain-stream", "mcp.4f9a2c.req-17")
    page.click("#explain-form button[type=submit]")

    banner = page.locator(".verdict-banner")
    expect(banner).to_contain_text("reset")
    expect(banner).to_contain_text("superseded")
    # The table's rows: 1, 2, 3, 4, 4a, 4b, 5 … 10; row 5 (the seventh) decides.
    rows = page.locator(".decision-table tbody tr")
    expect(rows).to_have_count(12)
    names = [rows.nth(i).get_attribute("data-row") for i in range(12)]
    assert names == ["1", "2", "3", "4", "4a", "4b", "5", "6", "7", "8", "9", "10"]
    classes = [rows.nth(i).get_attribute("class") or "" for i in range(12)]
    assert [names[i] for i, c in enumerate(classes) if "decided" in c] == ["5"]
    assert all("passed" in c for c in classes[:6])
    assert all("unreached" in c for c in classes[7:])
    expect(rows.nth(6)).to_contain_text("decides")
    expect(page.locator("#would-deliver")).to_contain_text("Start over with 45 events")
    expect(page.locator("#would-deliver a")).to_have_attribute(
        "href", f"#/generations/{third}?after=0"
    )

    # Another claim from the same form: beyond the tail is invalid, and nothing is sent.
    page.fill("#explain-id", f"{third}:99")
    page.click("#explain-form button[type=submit]")
    expect(banner).to_contain_text("beyond_tail")
    expect(page.locator(".decision-table tr.decided")).to_have_attribute("data-row", "4")
    expect(page.locator("#would-deliver")).to_contain_text("closes the stream with an error")


def test_terminate_a_generation_after_confirming(page: Page, base: str) -> None:
    from playwright.sync_api import expect

    writer = Writer(base, ACME)
    try:
        token = writer.open("ops.stuck-job", producer="worker-z")
        writer.append(token, progress(7))
    finally:
        writer.close()
    sign_in(page, base)
    page.goto(f"{base}/admin/ui/#/generations/{token}")
    dialog = page.locator("dialog#confirm")

    page.click("#terminate")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("Terminate generation #1?")
    expect(dialog).to_contain_text("seq 7")
    page.click("#confirm-cancel")
    expect(dialog).to_be_hidden()
    with admin_api(base) as api:
        assert api.get(f"/admin/v1/generations/{token}").json()["terminal"] is False

    page.click("#terminate")
    page.click("#confirm-ok")
    expect(page.locator(".page-header .badge")).to_have_text("terminal")
    expect(page.locator(".toast")).to_contain_text("terminal at seq 7")
    expect(page.locator("#terminate")).to_have_count(0)
    with admin_api(base) as api:
        done = api.get(f"/admin/v1/generations/{token}").json()
    assert (done["terminal"], done["terminal_seq"]) == (True, 7)


def test_purge_waits_for_the_stream_id_to_be_typed(page: Page, base: str) -> None:
    from playwright.sync_api import expect

    writer = Writer(base, ACME)
    try:
        writer.append(writer.open("ops.to-purge"), progress(4))
        writer.append(writer.open("ops.to-purge", reason="retry"), progress(3))
    finally:
        writer.close()
    sign_in(page, base)
    page.goto(f"{base}/admin/ui/#/streams/acme/ops.to-purge")
    page.click("#purge-stream")
    expect(page.locator("dialog#confirm")).to_contain_text("7 events now")
    ok = page.locator("#confirm-ok")
    expect(ok).to_be_disabled()
    page.fill("#confirm-input", "ops.to-purg")
    expect(ok).to_be_disabled()
    page.fill("#confirm-input", "ops.to-purge")
    expect(ok).to_be_enabled()
    ok.click()
    expect(page.locator(".toast")).to_contain_text("Purged 7 events")
    expect(page.locator("#timeline .bar-expired")).to_have_count(2)
    with admin_api(base) as api:
        detail = api.get("/admin/v1/streams/ops.to-purge", params={"tenant": "acme"}).json()
    assert [g["expired"] for g in detail["generations"]] == [True, True]


def test_stored_markup_is_shown_as_text_and_never_run(
    page: Page, base: str, seeded: Seeded
) -> None:
    from playwright.sync_api import expect

    [token] = seeded.chain("debug.hostile-payload")
    sign_in(page, base)
    page.goto(f"{base}/admin/ui/#/generations/{token}")
    data = page.locator("#view-generation .event-data")
    expect(data).to_have_count(2)
    assert data.first.text_content() == HOSTILE
    first_row = page.locator("#view-generation tbody tr").first
    assert first_row.locator("td").nth(2).text_content() == HOSTILE  # the SSE event type
    expect(page.locator(".tile-sub").nth(2)).to_have_text(f"producer {HOSTILE}")

    page.goto(f"{base}/admin/ui/#/streams/acme/debug.hostile-payload")
    page.locator("#timeline .generation-row").hover()
    expect(page.locator("#tooltip")).to_contain_text(HOSTILE)

    page.goto(f"{base}/admin/ui/#/decisions?reason=malformed_id")
    expect(page.locator("#decision-entries tbody tr")).to_have_count(2)
    expect(page.locator("#decision-entries")).to_contain_text(HOSTILE[:39])

    page.goto(f"{base}/admin/ui/#/explain?{_query(id=HOSTILE)}")
    expect(page.locator(".verdict-banner")).to_contain_text("malformed_id")
    expect(page.locator("#explain-result .facts")).to_contain_text(HOSTILE)

    # Nothing of it ran, and no element came out of it.
    assert page.evaluate("window.__pwned") is None
    assert page.locator("main img, #tooltip img").count() == 0
    assert page.locator("script").count() == 1


def test_innerhtml_is_refused_by_the_page_policy(page: Page, base: str) -> None:
    sign_in(page, base)
    page.wait_for_selector("#view-streams")
    # Trusted Types with no policy: even a bug that tried innerHTML could not inject markup.
    refused = page.evaluate(
        "() => { try { document.body.innerHTML = '<b>x</b>'; return false; }"
        " catch (e) { return e instanceof TypeError; } }"
    )
    assert refused is True
    page.evaluate("window.__problems = []")  # that refusal was reported; it was the point


def test_decisions_chart_and_filters(page: Page, base: str) -> None:
    from playwright.sync_api import expect

    with admin_api(base) as api:
        everything = api.get("/admin/v1/decisions", params={"limit": 1000}).json()["decisions"]
    invalid = [d for d in everything if d["verdict"] == "invalid"]
    sign_in(page, base)
    page.click("#nav a[data-view=decisions]")
    expect(page.locator("#verdict-chart")).to_be_visible()
    expect(page.locator("#chart-window")).to_contain_text(f"The {len(everything)} decisions")
    chart_total = page.evaluate(
        "[...document.querySelectorAll('#verdict-chart .bucket rect[fill]')].length"
    )
    assert chart_total >= 1
    page.select_option("#decision-filters select[name=verdict]", "invalid")
    page.click("#decision-filters button[type=submit]")
    expect(page).to_have_url(re.compile(r"verdict=invalid"))
    rows = page.locator("#decision-entries tbody tr")
    expect(rows).to_have_count(len(invalid))
    expect(page.locator("#decision-entries .badge")).to_have_text(["invalid"] * len(invalid))


def test_stats_agree_with_the_api(page: Page, base: str) -> None:
    from playwright.sync_api import expect

    sign_in(page, base)
    page.click("#nav a[data-view=stats]")
    expect(page.locator("#verdict-bars")).to_be_visible()
    with admin_api(base) as api:
        stats = api.get("/admin/v1/stats").json()
    tiles = page.locator("#view-stats .tile-value")
    expect(tiles.nth(0)).to_have_text(f"{stats['streams']:,}")
    expect(tiles.nth(2)).to_have_text(f"{stats['retained_events']:,}")
    expect(page.locator("#verdict-bars .bar-item")).to_have_count(len(stats["verdicts"]))


def test_streams_page_on_with_the_cursor(page: Page, base: str) -> None:
    from playwright.sync_api import expect

    sign_in(page, base)
    page.goto(f"{base}/admin/ui/#/streams?limit=25")
    rows = page.locator("#view-streams tbody tr")
    expect(rows).to_have_count(25)
    first_cell = rows.first.locator("td").first
    first_page = first_cell.inner_text()
    page.click("#next-page")
    expect(page).to_have_url(re.compile(r"cursor="))
    expect(first_cell).not_to_have_text(first_page)
    second_page = first_cell.inner_text()
    page.click("text=← Previous")
    expect(first_cell).to_have_text(first_page)
    assert first_page != second_page


def test_open_mode_needs_no_key(browser: Browser, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    env = server_env(f"sqlite+aiosqlite:///{tmp_path / 'open.db'}")
    del env["EVENTLOG_KEYS"]
    with running_server(env) as base:
        writer = httpx.post(f"{base}/v1/streams/open.stream/generations", timeout=30)
        assert writer.status_code == 201
        context = browser.new_context()
        try:
            opened = context.new_page()
            opened.goto(f"{base}/admin/ui/")
            expect(opened.locator("#view-streams")).to_contain_text("open.stream")
            expect(opened.locator("#session")).to_contain_text("open mode")
            expect(opened.locator("#login")).to_have_count(0)
        finally:
            context.close()


def _query(**params: Any) -> str:
    return str(httpx.QueryParams(params))


def test_tasks_are_listed_by_status_and_shown_with_attempts_and_events(
    page: Page, base: str
) -> None:
    from playwright.sync_api import expect

    headers = {"Authorization": f"Bearer {ACME}"}
    with httpx.Client(base_url=base, headers=headers, timeout=30) as writer:
        task = writer.post("/v1/tasks", json={"principal": "console-user"}).json()
        task_id = task["task_id"]
        writer.post(f"/v1/tasks/{task_id}/attempts", json={"supersedes": 1})
        events = {"attempt": 2, "events": [{"data": "half way", "event": "progress"}]}
        writer.post(f"/v1/tasks/{task_id}/events", json=events)
        failed = writer.post("/v1/tasks", json={}).json()
        error = {"code": -32000, "message": HOSTILE}
        body = {"attempt": 1, "status": "failed", "error": error}
        writer.post(f"/v1/tasks/{failed['task_id']}/status", json=body)
    sign_in(page, base)
    page.click("#nav a[data-view=tasks]")
    expect(page.locator("#view-tasks tbody tr").first).to_be_visible()
    page.select_option("#task-filters select[name=status]", "failed")
    page.click("#task-filters button[type=submit]")
    expect(page).to_have_url(re.compile(r"status=failed"))
    expect(page.locator("#view-tasks tbody .badge")).to_have_text(["failed"])
    page.click("#view-tasks tbody a")
    # The outcome is shown as its JSON, as text (never run): the message JSON-escaped.
    expect(page.locator("#task-outcome")).to_contain_text(json.dumps(HOSTILE))
    assert page.evaluate("window.__pwned") is None
    page.goto(f"{base}/admin/ui/#/tasks/{task_id}")
    expect(page.locator("#view-task")).to_contain_text("half way")
    expect(page.locator("#view-task table").first.locator("tbody tr")).to_have_count(2)
