"""Headless Chromium (Debian's package) driven by Playwright, for the dashboard's end-to-end tests."""

from __future__ import annotations

import os
import shutil
from contextlib import contextmanager

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# Flags for a closed network: without the background-networking ones Chromium keeps dialling out.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@contextmanager
def chromium():
    """A Playwright browser on Debian's Chromium."""
    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in this thread; the ORM calls the tests make around it are synchronous.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def login(browser, base_url: str, username: str, password: str):
    """A new page logged in through the real login form."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{base_url}/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{base_url}/")
    return page
