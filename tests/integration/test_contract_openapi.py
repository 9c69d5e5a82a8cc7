"""The OpenAPI document itself: valid OpenAPI 3.1, its error codes the ones the gateway sends, and served by the
real gateway byte for byte."""
import json
import os
import re
import shutil
import subprocess

import pytest

from contract import OPENAPI_PATH, ROOT, check_response, error_body, error_catalogue, load_document, response_spec

CONTRACT_DIR = ROOT / "tests" / "contract"


def contract_tools(package):
    """node, with tests/contract's pinned packages installed (npm ci when package is missing)."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the OpenAPI tools (tests/contract) cannot run")
    if not (CONTRACT_DIR / "node_modules" / package).is_dir():
        npm = shutil.which("npm")
        assert npm is not None, "node is installed but npm is not: cannot install tests/contract"
        ci = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=CONTRACT_DIR,
                            capture_output=True, text=True, timeout=300)
        assert ci.returncode == 0, f"npm ci in tests/contract failed:\n{ci.stdout}\n{ci.stderr}"
    return node


def test_openapi_document_passes_the_openapi_31_validator():
    node = contract_tools("@seriousme/openapi-schema-validator")
    run = subprocess.run([node, "validate.mjs", str(OPENAPI_PATH)], cwd=CONTRACT_DIR, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, f"validator rejected {OPENAPI_PATH}:\n{run.stdout}\n{run.stderr}"


def test_redocly_lint_reports_no_error_and_no_warning():
    # Redocly's recommended rules, as `npx @redocly/cli lint` applies them (the pinned version of package-lock.json).
    node = contract_tools("@redocly/cli")
    cli = CONTRACT_DIR / "node_modules" / "@redocly" / "cli" / "bin" / "cli.js"
    run = subprocess.run([node, str(cli), "lint", "--format=stylish", str(OPENAPI_PATH)], cwd=CONTRACT_DIR,
                         capture_output=True, text=True, timeout=300, env={**os.environ, "REDOCLY_TELEMETRY": "off",
                                                                            "REDOCLY_SUPPRESS_UPDATE_NOTICE": "true"})
    out = run.stdout + run.stderr
    problems = [line for line in out.splitlines() if re.match(r"^\s*\d+:\d+\s+(error|warning)\s", line)]
    assert run.returncode == 0 and not problems, f"redocly lint found problems in {OPENAPI_PATH}:\n{out}"
    assert "Your API description is valid" in out and "You have 1 warning" not in out and " warnings." not in out, out


def test_document_declares_version_and_paths_of_the_api():
    doc = load_document()
    assert doc["openapi"] == "3.1.0"
    assert doc["info"]["version"] == "1.0.0"
    assert set(doc["paths"]) == {"/health", "/ready", "/openapi.json", "/v1/video/transcript", "/v1/video/tracks",
                                 "/v1/video/metadata", "/v1/jobs", "/v1/jobs/{id}", "/v1/jobs/{id}/items", "/mcp",
                                 "/v1/usage"}
    scheme = doc["components"]["securitySchemes"]["ApiKeyAuth"]
    assert scheme == {**scheme, "type": "apiKey", "in": "header", "name": "x-api-key"}
    assert "security" not in doc, "security must apply to the protected operations only"
    for method in ("get", "head"):
        assert doc["paths"]["/v1/video/transcript"][method]["security"] == [{"ApiKeyAuth": []}]
        assert doc["paths"]["/v1/video/tracks"][method]["security"] == [{"ApiKeyAuth": []}]
        assert doc["paths"]["/v1/video/metadata"][method]["security"] == [{"ApiKeyAuth": []}]
        assert doc["paths"]["/health"][method]["security"] == [], "a public operation says so: security []"
        assert doc["paths"]["/ready"][method]["security"] == []
        assert doc["paths"]["/openapi.json"][method]["security"] == []


def test_every_get_has_a_head_twin_with_its_parameters_and_statuses():
    doc = load_document()
    for path, item in doc["paths"].items():
        if "get" not in item:
            assert "head" not in item, path
            continue
        assert {"get", "head"} <= set(item), f"{path}: {sorted(item)}"
        get, head = item["get"], item["head"]
        assert head.get("parameters") == get.get("parameters"), path
        assert set(head["responses"]) == set(get["responses"]), path
        for status in head["responses"]:
            spec, _ = response_spec("HEAD", path, status if status[0].isdigit() and "X" not in status else 400)
            assert "content" not in spec, f"HEAD {path} {status} declares a body"


def test_error_code_enum_equals_the_codes_of_the_error_table():
    doc = load_document()
    enum = doc["components"]["schemas"]["ErrorCode"]["enum"]
    assert len(enum) == len(set(enum)), f"ErrorCode enum repeats a code: {enum}"
    assert set(enum) == set(error_catalogue()), (
        f"only in the document: {sorted(set(enum) - set(error_catalogue()))}, "
        f"only in gateway/http/errors.h: {sorted(set(error_catalogue()) - set(enum))}")


# The codes only the batch jobs' endpoints answer (a request body, its members, the job store).
JOBS_ONLY_CODES = {"length_required", "unsupported_media_type", "invalid_json", "invalid_request", "too_many_items",
                   "too_many_open_jobs", "too_many_stored_items", "invalid_cursor", "invalid_limit", "jobs_unavailable",
                   "webhook_url_refused"}
# Answered by POST /mcp only, before its message is read.
MCP_ONLY_CODES = {"forbidden_origin", "not_acceptable", "unsupported_protocol_version"}


def test_every_transcript_error_code_is_declared_under_its_status():
    # Every code the transcript endpoint can answer must validate as the body of its own status there; not_found and
    # method_not_allowed belong to other paths and methods.
    for code, (status, _) in error_catalogue().items():
        if code in ("not_found", "method_not_allowed") or code in JOBS_ONLY_CODES | MCP_ONLY_CODES:
            continue
        headers = {"x-request-id": "r1", "content-type": "application/json", "retry-after": "1",
                   "x-ratelimit-limit": "60", "x-ratelimit-remaining": "0", "x-ratelimit-reset": "1700000000",
                   "www-authenticate": 'ApiKey header="x-api-key"'}
        check_response("GET", "/v1/video/transcript", status, headers, json.dumps(error_body(code)).encode())


RATE_LIMIT_HEADERS = ("X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset")


@pytest.mark.parametrize("method", ["GET", "HEAD"])
@pytest.mark.parametrize("path", ["/v1/video/transcript", "/v1/video/tracks", "/v1/video/metadata"])
def test_rate_limit_headers_are_declared_on_every_answer_that_carries_them(method, path):
    # After the limiter every answer carries them: required where every answer of the status comes after it.
    for status in (200, 404, 429, 500, 502):
        spec, _ = response_spec(method, path, status)
        for name in RATE_LIMIT_HEADERS + ("X-Request-Id",):
            assert spec["headers"][name]["required"] is True, f"{name} must be required on {method} {path} {status}"
        # A 429 of the limiter, or a 502 when the platform is known not to answer before then (every egress resting).
        assert ("Retry-After" in spec["headers"]) == (status in (429, 502)), status
        if status == 502:
            assert spec["headers"]["Retry-After"]["required"] is False
    # 400 and 503 are also answered before the limiter (HTTP-level errors): declared, not required.
    for status in (400, 503):
        spec, _ = response_spec(method, path, status)
        for name in RATE_LIMIT_HEADERS:
            assert spec["headers"][name]["required"] is False, f"{name} on {method} {path} {status}"
    spec, _ = response_spec(method, path, 401)
    assert not set(RATE_LIMIT_HEADERS) & set(spec["headers"]), "a 401 is answered before the limiter"


@pytest.mark.parametrize("path", ["/health", "/ready", "/openapi.json", "/v1/video/transcript", "/v1/video/tracks",
                                  "/v1/video/metadata"])
def test_405_carries_allow_as_declared(gateway, path):
    r = gateway.request("DELETE", path)
    assert r.status == 405, r
    assert r.headers["allow"] == "GET, HEAD"
    assert r.json() == error_body("method_not_allowed")
    check_response("DELETE", path, r.status, r.headers, r.body)
    doc = load_document()
    allow = doc["components"]["headers"]["Allow"]
    assert "GET, HEAD" in allow["schema"]["enum"]


def test_openapi_json_is_served_byte_for_byte(gateway):
    expected = OPENAPI_PATH.read_bytes()
    r = gateway.request("GET", "/openapi.json")
    assert r.status == 200, f"GET /openapi.json: {r.status} {r.body[:200]!r}"
    assert r.body == expected, "GET /openapi.json differs from gateway/http/openapi.json"
    assert r.headers.get("content-type", "").split(";")[0].strip() == "application/json"
    check_response("GET", "/openapi.json", r.status, r.headers, r.body)


def test_openapi_json_needs_no_api_key_and_ignores_a_bad_one(gateway):
    r = gateway.request("GET", "/openapi.json", headers={"x-api-key": "not-a-key"})
    assert r.status == 200
    assert r.body == OPENAPI_PATH.read_bytes()


def test_head_openapi_json_has_headers_and_no_body(gateway):
    # The document promises HEAD answered like GET without a body.
    r = gateway.request("HEAD", "/openapi.json")
    assert r.status == 200, f"HEAD /openapi.json: {r.status}"
    assert r.body == b""
    assert r.headers.get("content-length") == str(len(OPENAPI_PATH.read_bytes()))
    check_response("HEAD", "/openapi.json", r.status, r.headers, r.body)


def test_health_matches_the_document(gateway):
    r = gateway.request("GET", "/health")
    assert r.status == 200
    body = check_response("GET", "/health", r.status, r.headers, r.body)
    assert body["service"] == "api" and body["status"] == "ok"
    # The document's example has every field the service sends, each in the same form.
    doc = json.loads(OPENAPI_PATH.read_text())
    example = doc["paths"]["/health"]["get"]["responses"]["200"]["content"]["application/json"]["examples"]["ok"]
    assert sorted(example["value"]) == sorted(body)
    assert re.fullmatch(r"libuv/\d+\.\d+\.\d+", body["nodeVersion"]), body["nodeVersion"]
    assert re.fullmatch(r"libuv/\d+\.\d+\.\d+", example["value"]["nodeVersion"]), example["value"]["nodeVersion"]


def test_unknown_path_and_method_match_the_document(gateway):
    r = gateway.request("GET", "/v2/nothing")
    assert r.status == 404
    assert r.json() == error_body("not_found")
    check_response("GET", "/v2/nothing", r.status, r.headers, r.body)
    r = gateway.request("POST", "/health")
    assert r.status == 405
    assert r.json() == error_body("method_not_allowed")
    check_response("POST", "/health", r.status, r.headers, r.body)
