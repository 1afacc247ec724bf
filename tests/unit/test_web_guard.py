"""Mission Control's request guard on its own (hosts/web/guard.py is pure): the same refusals
tests/web meets through the real server, decided here from method, path and headers alone."""

from __future__ import annotations

import pytest

from tillage.hosts.web.guard import SECURITY_HEADERS, check

PORT, TOKEN = 8765, "t" * 43
PAGE = {
    "host": f"127.0.0.1:{PORT}",
    "origin": f"http://127.0.0.1:{PORT}",
    "x-tillage-token": TOKEN,
    "content-type": "application/json; charset=utf-8",
    "sec-fetch-site": "same-origin",
}


def refused(method: str, path: str, headers: dict[str, str]) -> tuple[int, str] | None:
    found = check(method, path, headers, port=PORT, token=TOKEN)
    return None if found is None else (found.status, found.error)


def test_the_pages_own_calls_pass() -> None:
    assert refused("POST", "/api/call", PAGE) is None
    assert refused("GET", "/api/overview", {"host": PAGE["host"], "x-tillage-token": TOKEN}) is None
    assert refused("GET", "/", {"host": f"localhost:{PORT}"}) is None
    assert (
        refused(
            "POST",
            "/api/call",
            {**PAGE, "host": f"LOCALHOST:{PORT}", "origin": f"http://localhost:{PORT}"},
        )
        is None
    )


@pytest.mark.parametrize(
    ("change", "answer"),
    [
        ({"host": "evil.example"}, (403, "host")),
        ({"host": f"127.0.0.1:{PORT + 1}"}, (403, "host")),
        ({"x-tillage-token": ""}, (403, "token")),
        ({"x-tillage-token": TOKEN + "x"}, (403, "token")),
        ({"origin": "http://evil.example"}, (403, "origin")),
        ({"origin": f"http://localhost:{PORT}"}, (403, "origin")),  # another origin than Host's
        ({"sec-fetch-site": "cross-site"}, (403, "origin")),
        ({"content-type": "text/plain"}, (415, "origin")),
    ],
)
def test_each_layer_refuses_on_its_own(change: dict[str, str], answer: tuple[int, str]) -> None:
    assert refused("POST", "/api/call", {**PAGE, **change}) == answer


def test_a_post_without_origin_is_refused_and_a_get_needs_none() -> None:
    without = {k: v for k, v in PAGE.items() if k != "origin"}
    assert refused("POST", "/api/call", without) == (403, "origin")
    assert refused("GET", "/api/overview", without) is None


def test_the_headers_forbid_framing_referrers_and_inline_script() -> None:
    headers = dict(SECURITY_HEADERS)
    csp = headers["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp
    assert "unsafe-inline" not in csp
    assert headers["Referrer-Policy"] == "no-referrer"
    assert headers["Cross-Origin-Opener-Policy"] == "same-origin"
