"""Checks real responses against gateway/http/openapi.json: the document is the contract, so every response the
integration suite sees can be validated against the schema and headers the document itself declares.

    from contract import check_response
    r = gateway.request("GET", "/health")
    check_response("GET", "/health", r.status, r.headers, r.body)

Raises AssertionError naming the operation, the status and what did not match.
"""
import copy
import gzip
import json
import re
from pathlib import Path

import jsonschema

ROOT = Path(__file__).resolve().parents[2]
OPENAPI_PATH = ROOT / "gateway" / "http" / "openapi.json"
ERRORS_H = ROOT / "gateway" / "http" / "errors.h"

_document = None

# What answers a request the document has no operation for (an unknown path, or a method the path does not
# declare): an HTTP-level error in the ErrorResponse shape, with X-Request-Id like every response.
_FALLBACK_RESPONSE = {
    "description": "HTTP-level error for an undeclared path or method",
    "headers": {"X-Request-Id": {"$ref": "#/components/headers/X-Request-Id"}},
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}},
}

# The document says Retry-After is always sent with these codes (components/headers/Retry-After); OpenAPI cannot
# tie a header to a body value, so that part is checked here.
_RETRY_AFTER_CODES = {"rate_limited", "rate_limit_unavailable"}


def load_document():
    """The parsed OpenAPI document (read once)."""
    global _document
    if _document is None:
        _document = json.loads(OPENAPI_PATH.read_text(encoding="utf-8"))
    return _document


def error_catalogue():
    """{code: (status, message)} as the rows of API_ERRORS in gateway/http/errors.h define them."""
    text = ERRORS_H.read_text(encoding="utf-8")
    text = re.sub(r"\\\n", "\n", text)  # the table's line continuations
    text = re.sub(r'"\s*\n\s*"', "", text)  # joined string literals
    found = re.findall(r'\bX\(\s*[A-Z_]+\s*,\s*(\d+)\s*,\s*"([^"]+)"\s*,\s*((?:"(?:[^"\\]|\\.)*"\s*)+)\)', text)
    out = {}
    for status, code, message in found:
        parts = re.findall(r'"((?:[^"\\]|\\.)*)"', message)
        # A code may have a second, narrower message (bad_request for a bad format): the first one is the code's own.
        out.setdefault(code, (int(status), "".join(parts).encode().decode("unicode_escape")))
    if not out:
        raise AssertionError(f"no error definitions found in {ERRORS_H}")
    return out


def error_body(code):
    """The exact body the gateway sends for an error code."""
    _, message = error_catalogue()[code]
    return {"error": {"code": code, "message": message}}


def _pointer(doc, ref):
    if not ref.startswith("#/"):
        raise AssertionError(f"non-local $ref {ref} in {OPENAPI_PATH}")
    node = doc
    for raw in ref[2:].split("/"):
        key = raw.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or key not in node:
            raise AssertionError(f"$ref {ref} does not resolve in {OPENAPI_PATH}")
        node = node[key]
    return node


def _resolve(doc, node, seen=()):
    """A copy of node with every local $ref replaced by its target (the document has no recursive schemas)."""
    if isinstance(node, dict):
        if "$ref" in node:
            ref = node["$ref"]
            if ref in seen:
                raise AssertionError(f"recursive $ref {ref} in {OPENAPI_PATH}")
            target = _resolve(doc, _pointer(doc, ref), seen + (ref,))
            rest = {k: _resolve(doc, v, seen) for k, v in node.items() if k != "$ref"}
            if not rest:
                return target
            return {"allOf": [target, rest]}  # 3.1 allows siblings of $ref: both apply
        return {k: _resolve(doc, v, seen) for k, v in node.items()}
    if isinstance(node, list):
        return [_resolve(doc, v, seen) for v in node]
    return copy.deepcopy(node)


def _path_item(doc, path):
    paths = doc.get("paths", {})
    if path in paths:
        return path, paths[path]
    for template, item in paths.items():
        pattern = "^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template)) + "$"
        if re.match(pattern, path):
            return template, item
    return None, None


def response_spec(method, path, status):
    """The resolved Response Object the document declares for method, path and status; and a label for messages."""
    doc = load_document()
    path = path.split("?", 1)[0]
    template, item = _path_item(doc, path)
    method = method.upper()
    # A HEAD answers like its GET: the document's HEAD operation when it declares one, else the GET's.
    op_method = "get" if method == "HEAD" and item is not None and "head" not in item else method.lower()
    if item is None or op_method not in item:
        label = f"{method} {path} (undeclared {'path' if item is None else 'method'})"
        return _resolve(doc, _FALLBACK_RESPONSE), label
    responses = item[op_method].get("responses", {})
    label = f"{method} {template} -> {status}"
    for key in (str(status), f"{str(status)[0]}XX", "default"):
        if key in responses:
            return _resolve(doc, responses[key]), label
    raise AssertionError(f"{label}: status {status} is not declared (declared: {sorted(responses)})")


def _validate(schema, instance, what):
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    errors = sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path))
    if errors:
        lines = [f"  at /{'/'.join(str(p) for p in e.absolute_path)}: {e.message}" for e in errors[:10]]
        raise AssertionError(f"{what} does not match its schema:\n" + "\n".join(lines))


def decode_content(coding, raw):
    """raw decoded from its Content-Encoding (None: as it is); an unknown coding fails the check."""
    if coding is None or raw is None:
        return raw
    if coding == "gzip":
        return gzip.decompress(raw)
    if coding == "br":
        import brotli  # Debian's python3-brotli (deploy/deps.sh)
        return brotli.decompress(raw)
    raise AssertionError(f"unexpected Content-Encoding {coding!r}")


def check_response(method, path, status, headers, body):
    """Validates one response against the document: status declared, required headers present and well-formed,
    content type and JSON body matching the declared schema (HEAD: no body). Returns the parsed body (or None)."""
    spec, label = response_spec(method, path, status)
    hdrs = {str(k).lower(): v for k, v in (headers or {}).items()}

    for name, h in spec.get("headers", {}).items():
        value = hdrs.get(name.lower())
        if value is None:
            if h.get("required"):
                raise AssertionError(f"{label}: required header {name} is missing (got {sorted(hdrs)})")
            continue
        if "schema" in h:
            _validate(h["schema"], value, f"{label}: header {name}={value!r}")

    if isinstance(body, (bytes, bytearray)):
        raw = bytes(body)
    elif isinstance(body, str):
        raw = body.encode()
    else:
        raw = None  # already parsed

    content = spec.get("content")
    if method.upper() == "HEAD":
        if raw:
            raise AssertionError(f"{label}: HEAD response has a body of {len(raw)} bytes")
        return None
    if not content:
        if raw:
            raise AssertionError(f"{label}: no content is declared but the body has {len(raw)} bytes")
        return None

    raw = decode_content(hdrs.get("content-encoding"), raw)
    ctype = hdrs.get("content-type", "").split(";", 1)[0].strip().lower()
    if ctype not in content:
        raise AssertionError(f"{label}: Content-Type {ctype!r} is not one of {sorted(content)}")
    schema = content[ctype].get("schema", {})
    if raw is None:
        parsed = body
    elif not (ctype == "application/json" or ctype.endswith("+json")):
        # A text format (plain text, SubRip, WebVTT): the body is one string, validated as such.
        try:
            parsed = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise AssertionError(f"{label}: {ctype} body is not UTF-8 ({e}): {raw[:200]!r}") from None
    else:
        try:
            parsed = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise AssertionError(f"{label}: body is not JSON ({e}): {raw[:200]!r}") from None
    _validate(schema, parsed, f"{label}: body {json.dumps(parsed)[:300]}")

    if isinstance(parsed, dict) and isinstance(parsed.get("error"), dict):
        code = parsed["error"].get("code")
        catalogue = error_catalogue()
        if code in catalogue and catalogue[code][0] != status:
            raise AssertionError(f"{label}: code {code} belongs to status {catalogue[code][0]}, not {status}")
        if code in _RETRY_AFTER_CODES and "retry-after" not in hdrs:
            raise AssertionError(f"{label}: {code} must carry Retry-After")
        if code == "method_not_allowed" and hdrs.get("allow") != "GET, HEAD":
            raise AssertionError(f"{label}: method_not_allowed must carry Allow: GET, HEAD (got {hdrs.get('allow')!r})")
    return parsed
