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
    page.wait_for_url(f"{base_url}/", wait_until="domcontentloaded")
    return page


# Collects what the page's Content-Security-Policy refused (and every console error) from the start of each
# document: Playwright's init scripts run outside the page's CSP.
_CSP_WATCH = """
window.__cspViolations = [];
document.addEventListener('securitypolicyviolation', function (e) {
  window.__cspViolations.push(e.violatedDirective + ' blocked ' + (e.blockedURI || 'inline') + ' at ' +
    (e.sourceFile || document.location.pathname) + ':' + e.lineNumber);
});
"""


def watch_csp(page) -> list[str]:
    """Console errors (CSP refusals among them) of ``page`` from now on, as a list that fills as it runs.

    ``csp_violations(page)`` reads the current document's securitypolicyviolation events.
    """
    errors: list[str] = []
    page.add_init_script(_CSP_WATCH)

    def on_console(msg):
        if msg.type == "error":
            errors.append(f"{msg.text} ({(msg.location or {}).get('url', '')})")

    page.on("console", on_console)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    return errors


def csp_violations(page) -> list[str]:
    """The securitypolicyviolation events of the document ``page`` shows (watch_csp must have been called)."""
    return page.evaluate("window.__cspViolations || []")
