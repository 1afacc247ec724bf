"""Who may drive Mission Control: every refusal a hostile page or a careless script meets,
against the real `till ui` process, and the headers every answer carries."""

from __future__ import annotations

import subprocess

import pytest

from tests.web.conftest import Mission, no_cors

SECURITY = {
    "referrer-policy": "no-referrer",
    "cross-origin-opener-policy": "same-origin",
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
}


def _secured(headers: dict[str, str]) -> bool:
    csp = headers.get("content-security-policy", "")
    return (
        all(headers.get(k) == v for k, v in SECURITY.items())
        and "frame-ancestors 'none'" in csp
        and "script-src 'self'" in csp
    )


def test_every_kind_of_answer_carries_the_security_headers(mission: Mission) -> None:
    answers = [
        mission.request("GET", "/"),
        mission.request("GET", "/static/app.js"),
        mission.get("/api/overview"),
        mission.request("GET", "/api/overview"),  # refused: no token
        mission.request("GET", "/", headers={"Host": "evil.example:80"}),
        mission.request("GET", "/nothing-here"),
        mission.request("OPTIONS", "/api/call", headers={"Origin": "http://evil.example"}),
        mission.post("/api/call", {"verb": "nope", "universe": "x"}),
    ]
    assert [a.status for a in answers] == [200, 200, 200, 403, 403, 404, 405, 404]
    for answer in answers:
        assert _secured(answer.headers), answer.headers
        assert no_cors(answer)  # no origin is ever let in by CORS
    assert answers[0].headers["content-type"].startswith("text/html")
    assert answers[1].headers["content-type"].startswith("text/javascript")


@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:{port}", "127.0.0.1:1", "localhost.evil:{port}", ""]
)
def test_a_request_naming_another_host_is_refused(mission: Mission, host: str) -> None:
    """DNS rebinding: a site that points its own name at 127.0.0.1 sends its own name."""
    named = host.format(port=mission.port)
    for answer in (
        mission.request("GET", "/", headers={"Host": named}),
        mission.request(
            "GET", "/api/overview", headers={"Host": named, "X-Tillage-Token": mission.token}
        ),
        mission.request(
            "POST",
            "/api/call",
            {"verb": "timeline.pin", "universe": "x", "params": {"id": "head"}},
            headers={**mission.page_headers(), "Host": named},
        ),
    ):
        assert answer.status == 403
        assert answer.error == "ui.host_refused"


def test_localhost_is_the_same_page(mission: Mission) -> None:
    answer = mission.request(
        "GET",
        "/api/overview",
        headers={"Host": f"localhost:{mission.port}", "X-Tillage-Token": mission.token},
    )
    assert answer.status == 200


def test_the_api_needs_this_runs_token_in_its_header(mission: Mission) -> None:
    root = mission.universe("project")
    call = {"verb": "timeline.list", "universe": root, "params": {}}
    without = {k: v for k, v in mission.page_headers().items() if k != "X-Tillage-Token"}
    for headers in (
        without,
        {**without, "X-Tillage-Token": "not-the-token"},
        {**without, "X-Tillage-Token": mission.token[:-1]},
        {**without, "Cookie": f"token={mission.token}; X-Tillage-Token={mission.token}"},
    ):
        answer = mission.request("POST", "/api/call", call, headers=headers)
        assert answer.status == 403
        assert answer.error == "ui.token_refused"
    assert mission.request("GET", "/api/overview").error == "ui.token_refused"
    assert mission.request("GET", f"/api/overview?token={mission.token}").status == 403
    assert mission.request("GET", "/api/events").error == "ui.token_refused"
    assert mission.post("/api/call", call).status == 200


def test_a_call_that_changes_something_must_come_from_the_page(mission: Mission) -> None:
    root = mission.universe("project")
    pin = {"verb": "timeline.pin", "universe": root, "params": {"id": "head"}}
    page = mission.page_headers()
    cases = [
        ({k: v for k, v in page.items() if k != "Origin"}, 403),  # no Origin at all
        ({**page, "Origin": "http://evil.example"}, 403),
        ({**page, "Origin": "null"}, 403),  # a sandboxed frame or a file:// page
        ({**page, "Origin": f"http://127.0.0.1:{mission.port + 1}"}, 403),
        ({**page, "Origin": f"https://127.0.0.1:{mission.port}"}, 403),
        ({**page, "Sec-Fetch-Site": "cross-site"}, 403),
        ({**page, "Sec-Fetch-Site": "same-site"}, 403),
        ({**page, "Content-Type": "text/plain"}, 415),  # what a plain form may send
        ({**page, "Content-Type": "application/x-www-form-urlencoded"}, 415),
    ]
    for headers, status in cases:
        answer = mission.request("POST", "/api/call", pin, headers=headers)
        assert (answer.status, answer.error) == (status, "ui.origin_refused"), headers
    timeline = mission.result("/api/call", {"verb": "timeline.list", "universe": root})
    assert not any(s["pinned"] for s in timeline["snapshots"])  # none of them pinned anything
    assert mission.result("/api/call", pin)["snapshot"]["pinned"] is True


def test_methods_other_than_get_and_post_are_not_served(mission: Mission) -> None:
    for method in ("PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"):
        answer = mission.request(method, "/api/call", headers=mission.page_headers())
        assert answer.status == 405, method
        assert "access-control-allow-origin" not in answer.headers


def test_only_the_pages_own_files_are_served(mission: Mission) -> None:
    for path in (
        "/static/../calls.py",
        "/static/%2e%2e/calls.py",
        "/static/..%2fserver.py",
        "/static/server.py",
        "/static//etc/passwd",
        "/static/",
        "/etc/passwd",
        "/api/../static/app.js",
    ):
        answer = mission.request("GET", path)
        assert answer.status in (403, 404), path
        assert b"import" not in answer.body, path


def test_the_server_listens_on_loopback_only(mission: Mission) -> None:
    assert mission.url.startswith(f"http://127.0.0.1:{mission.port}/#token=")
    shown = subprocess.run(
        ["ss", "-Hltn", f"sport = :{mission.port}"], capture_output=True, text=True, check=False
    )
    if shown.returncode != 0:
        pytest.skip("ss is not installed here")
    listening = {line.split()[3] for line in shown.stdout.splitlines() if line.strip()}
    assert listening == {f"127.0.0.1:{mission.port}"}


def test_a_body_too_large_or_not_json_is_refused_unread(mission: Mission) -> None:
    big = mission.request(
        "POST", "/api/call", raw=b"{" + b" " * (2 << 20) + b"}", headers=mission.page_headers()
    )
    assert (big.status, big.error) == (413, "invalid_argument")
    for raw in (b"not json", b"[1,2]", b'"x"'):
        answer = mission.request("POST", "/api/call", raw=raw, headers=mission.page_headers())
        assert (answer.status, answer.error) == (400, "invalid_argument")
