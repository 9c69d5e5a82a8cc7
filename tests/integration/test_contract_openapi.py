"""The OpenAPI document itself: valid OpenAPI 3.1, its error codes the ones the gateway sends, and served by the
real gateway byte for byte."""
import json
import shutil
import subprocess

import pytest

from contract import OPENAPI_PATH, ROOT, check_response, error_body, error_catalogue, load_document, response_spec

CONTRACT_DIR = ROOT / "tests" / "contract"


def test_openapi_document_passes_the_openapi_31_validator():
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the OpenAPI validator (tests/contract) cannot run")
    if not (CONTRACT_DIR / "node_modules" / "@seriousme" / "openapi-schema-validator").is_dir():
        npm = shutil.which("npm")
        assert npm is not None, "node is installed but npm is not: cannot install tests/contract"
        ci = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=CONTRACT_DIR,
                            capture_output=True, text=True, timeout=300)
        assert ci.returncode == 0, f"npm ci in tests/contract failed:\n{ci.stdout}\n{ci.stderr}"
    run = subprocess.run([node, "validate.mjs", str(OPENAPI_PATH)], cwd=CONTRACT_DIR, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, f"validator rejected {OPENAPI_PATH}:\n{run.stdout}\n{run.stderr}"


def test_document_declares_version_and_paths_of_the_api():
    doc = load_document()
    assert doc["openapi"] == "3.1.0"
    assert doc["info"]["version"] == "1.0.0"
    assert set(doc["paths"]) == {"/health", "/openapi.json", "/v1/video/transcript", "/v1/video/tracks"}
    scheme = doc["components"]["securitySchemes"]["ApiKeyAuth"]
    assert scheme == {**scheme, "type": "apiKey", "in": "header", "name": "x-api-key"}
    assert doc["paths"]["/v1/video/transcript"]["get"]["security"] == [{"ApiKeyAuth": []}]
    assert doc["paths"]["/v1/video/tracks"]["get"]["security"] == [{"ApiKeyAuth": []}]
    assert "security" not in doc, "security must apply to the protected operations only"
    assert "security" not in doc["paths"]["/health"]["get"]
    assert "security" not in doc["paths"]["/openapi.json"]["get"]


def test_error_code_enum_equals_the_codes_of_errors_c():
    doc = load_document()
    enum = doc["components"]["schemas"]["ErrorCode"]["enum"]
    assert len(enum) == len(set(enum)), f"ErrorCode enum repeats a code: {enum}"
    assert set(enum) == set(error_catalogue()), (
        f"only in the document: {sorted(set(enum) - set(error_catalogue()))}, "
        f"only in gateway/http/errors.c: {sorted(set(error_catalogue()) - set(enum))}")


def test_every_transcript_error_code_is_declared_under_its_status():
    # Every code the transcript endpoint can answer must validate as the body of its own status there; not_found and
    # method_not_allowed belong to other paths and methods.
    for code, (status, _) in error_catalogue().items():
        if code in ("not_found", "method_not_allowed"):
            continue
        headers = {"x-request-id": "r1", "content-type": "application/json", "retry-after": "1",
                   "x-ratelimit-limit": "60", "x-ratelimit-remaining": "0", "x-ratelimit-reset": "1700000000"}
        check_response("GET", "/v1/video/transcript", status, headers, json.dumps(error_body(code)).encode())


def test_rate_limit_headers_are_required_on_200_and_429():
    for status in (200, 429):
        spec, _ = response_spec("GET", "/v1/video/transcript", status)
        for name in ("X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "X-Request-Id"):
            assert spec["headers"][name]["required"] is True, f"{name} must be required on {status}"
        assert "Retry-After" in spec["headers"] if status == 429 else "Retry-After" not in spec["headers"]


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


def test_unknown_path_and_method_match_the_document(gateway):
    r = gateway.request("GET", "/v2/nothing")
    assert r.status == 404
    assert r.json() == error_body("not_found")
    check_response("GET", "/v2/nothing", r.status, r.headers, r.body)
    r = gateway.request("POST", "/health")
    assert r.status == 405
    assert r.json() == error_body("method_not_allowed")
    check_response("POST", "/health", r.status, r.headers, r.body)
