"""Neo4j Browser with the shipped pack, in a real headless Chromium (Debian's `chromium`).

The Neo4j that `make test` starts was configured by the launcher: its Browser loads the style
and opens the guide on connect, from its own origin. The test logs in, sets the guide's
parameters, runs the guide's first query and reads the rendered graph, while recording every
request the page tries to make.
"""

from __future__ import annotations

import shutil
import tempfile
from urllib.parse import urlsplit

import pytest

from vaultgraph.neo4j_local import BROWSER_PACK, BROWSER_PACK_FILES

playwright_api = pytest.importorskip("playwright.async_api", reason="the test extra installs it")

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
LOOPBACK = {"127.0.0.1", "localhost"}
# Plaintext that must never appear in Browser: Neo4j holds ciphertext only.
CANARY_NUMBER = "4000056655665556"
CANARY_NAME = "Canary Ada Lovelace-7f3c"


def test_pack_files_exist():
    for name in BROWSER_PACK_FILES:
        assert (BROWSER_PACK / name).is_file(), name


async def _seed(client, headers) -> None:
    r = await client.post("/tokens", headers=headers, json={
        "id": "cust-ada", "type": "token", "data": {"name": CANARY_NAME}})
    assert r.status == 201, await r.text()
    r = await client.post("/tokens/cust-ada/children", headers=headers, json={
        "id": "card-visa-0001", "type": "card", "metadata": {"customer_id": "C-1001"},
        "data": {"number": CANARY_NUMBER, "expiration_month": 12, "expiration_year": 2030}})
    assert r.status == 201, await r.text()
    r = await client.post("/tokens/card-visa-0001/children", headers=headers, json={
        "id": "bank-checking", "type": "bank",
        "data": {"routing_number": "021000021", "account_number": "73920485617"}})
    assert r.status == 201, await r.text()


async def test_browser_renders_a_tenant_graph_with_the_pack(client, tenant, admin_headers,
                                                            settings):
    if not shutil.which("chromium"):
        pytest.fail("Debian's chromium is missing: `make test` installs it (make system-deps)")
    await _seed(client, admin_headers)
    http = f"http://127.0.0.1:{settings.neo4j_http_port}"
    attempted: list[tuple[str, str | None]] = []   # (url, failure) for non-loopback requests
    left_the_browser: list[str] = []

    async def guard(route):
        # Anything that reaches the network layer for another host is recorded and aborted.
        if urlsplit(route.request.url).hostname not in LOOPBACK:
            left_the_browser.append(route.request.url)
            await route.abort()
        else:
            await route.continue_()

    with tempfile.TemporaryDirectory(prefix="vg-chromium-") as profile:
        async with playwright_api.async_playwright() as pw:
            ctx = await pw.chromium.launch_persistent_context(
                profile, executable_path=CHROMIUM, headless=True, args=FLAGS,
                viewport={"width": 1600, "height": 1000})
            try:
                await ctx.route("**/*", guard)
                page = ctx.pages[0] if ctx.pages else await ctx.new_page()
                failures: dict[str, str | None] = {}
                page.on("requestfailed", lambda r: failures.__setitem__(r.url, r.failure))
                requested: list[str] = []
                page.on("request", lambda r: requested.append(r.url))

                await page.goto(f"{http}/browser/")
                await page.get_by_test_id("username").fill("neo4j")
                await page.get_by_test_id("password").fill(settings.resolved_neo4j_password())
                await page.get_by_test_id("connect").click()

                # post_connect_cmd: the style is applied and the guide opens in the sidebar.
                nxt = page.get_by_test_id("guideNextSlide")
                await nxt.wait_for(timeout=60_000)
                sidebar = page.locator("pre.runnable")
                assert (await sidebar.first.inner_text()).startswith(":params {tenant:")
                # The style's frame is fetched and drawn apart from the guide's: it may come
                # after it, so it is waited for (and the test fails if it never comes).
                await page.get_by_text(":style http://127.0.0.1").first.wait_for(timeout=30_000)

                editor = page.locator(".monaco-editor").first
                await editor.click()
                await page.keyboard.type(
                    f':params {{tenant: "{tenant.tenant_id}", token: "cust-ada"}}')
                await page.keyboard.press("Control+Enter")
                await page.get_by_text("Successfully set your parameters").wait_for()

                # The guide's first query: the token's neighbourhood to depth 2.
                await nxt.click()
                first = page.locator("pre.runnable").first
                assert "PARENT_OF*1..2" in await first.inner_text()
                await first.click()
                await page.get_by_test_id("editor-Run").first.click()
                nodes = page.locator("svg g.node")
                await nodes.nth(2).wait_for(timeout=30_000)

                captions = [(await t.text_content() or "").strip()
                            for t in await page.locator("svg g.node text").all()]
                # Captioned by type, then the id (cut to the node by Browser).
                assert "token" in captions and "card" in captions and "bank" in captions
                assert "cust-ada" in captions
                assert await nodes.count() == 3
                # Only PARENT_OF links are drawn: metadata self-loops stay out of the picture.
                rel_types = [(await t.text_content() or "") for t in
                             await page.locator("svg g.relationship text").all()]
                assert not any("HAS_META" in t for t in rel_types)
                assert await page.locator("svg g.relationship").count() == 2

                # The table view of the same result carries only ciphertext.
                await page.get_by_text("Table", exact=True).first.click()
                text = await page.locator("body").inner_text()
                html = await page.content()
                for canary in (CANARY_NUMBER, CANARY_NAME, "73920485617"):
                    assert canary not in text and canary not in html
                assert "card-visa-0001" in text   # the table really shows the tokens

                # Nothing left this machine: other hosts were refused by the page's policy
                # (failure "csp") before any network request, and none reached the router.
                assert left_the_browser == []
                foreign = [u for u in requested if urlsplit(u).hostname not in LOOPBACK]
                for url in foreign:
                    attempted.append((url, failures.get(url)))
                assert all(failure == "csp" for _, failure in attempted), attempted
            finally:
                await ctx.close()
