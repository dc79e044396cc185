"""GET /dashboard: the static files, their content types and caching; no browser needed."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from app.api.dashboard import STATIC_DIR


@pytest.fixture
def http() -> TestClient:
    from app.main import create_app

    return TestClient(create_app())


@pytest.mark.parametrize(
    ("path", "content_type"),
    [
        ("/dashboard", "text/html; charset=utf-8"),
        ("/dashboard/app.js", "text/javascript; charset=utf-8"),
        ("/dashboard/style.css", "text/css; charset=utf-8"),
    ],
)
def test_files_are_served_with_their_content_type_and_revalidated(http, path, content_type):
    response = http.get(path)
    assert response.status_code == 200
    assert response.headers["content-type"] == content_type
    assert response.headers["cache-control"] == "no-cache"
    assert response.headers["x-content-type-options"] == "nosniff"
    assert "script-src 'self'" in response.headers["content-security-policy"]
    again = http.get(path, headers={"If-None-Match": response.headers["etag"]})
    assert again.status_code == 304 and again.content == b""


def test_the_trailing_slash_and_every_module_resolve(http):
    assert http.get("/dashboard/", follow_redirects=True).status_code == 200
    for module in STATIC_DIR.glob("*.js"):
        assert http.get(f"/dashboard/{module.name}").status_code == 200


@pytest.mark.parametrize("name", ["missing.js", "..%2Fmain.py", ".hidden.js", "index.py", "app.js.map"])
def test_unknown_or_unsafe_names_are_404(http, name):
    assert http.get(f"/dashboard/{name}").status_code == 404


# Third-party files (app/dashboard/VENDORED.md): the addresses in their comments cite sources and fetch nothing;
# their code is checked like ours.
VENDORED = {"uplot.js"}


def _without_comments(js: str) -> str:
    """The code of a JS file without /* */ blocks and // line comments (a // after a colon, as in a URL in a
    string, is kept, so an address in the code is still seen)."""
    return re.sub(r"(^|[\s;{}(),])//.*$", r"\1", re.sub(r"/\*[\s\S]*?\*/", "", js), flags=re.M)


def test_without_comments_keeps_addresses_in_code():
    code = '/* see https://a.org/x */ const u = "https://b.org/y"; // from https://c.org/z\nf(); // https://d.org/'
    assert re.findall(r"https://(\w)\.org", _without_comments(code)) == ["b"]


def test_nothing_is_fetched_from_elsewhere_and_every_call_goes_through_v1():
    for path in STATIC_DIR.iterdir():
        text = path.read_text().replace("http://www.w3.org/2000/svg", "")  # an XML namespace, not a fetch
        if path.name in VENDORED:
            text = _without_comments(text)
        assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}/", text, re.I), f"{path.name} refers to another host"
        for imported in re.findall(r'^import .* from "([^"]+)";$', text, re.M):
            assert imported.startswith("./") and (STATIC_DIR / imported[2:]).is_file(), (path.name, imported)
        for route in re.findall(r"api\(`([^`$]*)", text):
            assert route.startswith("/v1/"), (path.name, route)
