"""The system tests: the whole product driven from outside (the dashboard in a browser as each role, screenshots,
a broker outage, hostile input, a live server), beside the tests of each app's modules in tests/<app>/.

Fixtures of the dashboard's role-by-role browser tests (test_dashboard_roles_e2e, test_desk_e2e).

Each of those modules builds its own ``site`` (a live server on its rows) and ``browser``; these log each
user in once per module and check every page a test ended on for Content-Security-Policy refusals.
"""

import pytest

from tests.browser import csp_violations, login, watch_csp


@pytest.fixture(scope="module")
def logged_in(site, browser):
    """One logged-in page per user for the whole module (a login is a second of every test otherwise)."""
    pages = {}
    yield pages
    for page in pages.values():
        page.close()


@pytest.fixture
def as_user(site, browser, logged_in):
    """as_user(name) -> that user's page, logged in through the form once per module. After the test, the
    page it ended on must have had nothing refused by the Content-Security-Policy."""
    used = []

    def open_as(name):
        if name not in logged_in:
            logged_in[name] = login(browser, site.url, name, f"pw-{name}")
            watch_csp(logged_in[name])
        used.append(logged_in[name])
        return logged_in[name]

    yield open_as
    for page in used:
        assert csp_violations(page) == [], page.url
