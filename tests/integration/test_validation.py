"""Every 400 of the transcript endpoint through the real gateway, the documented order when several rules fail, and
authentication before validation. Every request carries a valid key unless it tests the key; all answers are
rejected before any fetch, so no fetcher or upstream is involved."""
import pytest

from contract import check_response, error_body

ID = "aB3_-9zZ0xY"
PATH = "/v1/video/transcript"


def get(gateway, query, key=None):
    """GET the transcript endpoint with a raw (already encoded) query string and the fixture's key by default."""
    headers = {"x-api-key": gateway.key if key is None else key}
    path = PATH + ("?" + query if query is not None else "")
    r = gateway.request("GET", path, headers=headers)
    check_response("GET", path, r.status, r.headers, r.body)
    return r


def assert_error(r, status, code, query):
    got = r.json() if r.body else None
    assert (r.status, got) == (status, error_body(code)), (
        f"query {query!r}: expected {status} {code}, got {r.status} {r.body[:300]!r}")


CASES_400 = [
    # Exactly one of video_id and video_url.
    ("missing_both_no_query", None, "ambiguous_request"),
    ("missing_both_empty_query", "", "ambiguous_request"),
    ("missing_both_only_language", "language=en", "ambiguous_request"),
    ("missing_both_unknown_params", "videoid=" + ID + "&v=" + ID, "ambiguous_request"),
    ("both_given", "video_id=" + ID + "&video_url=https%3A%2F%2Fyoutu.be%2F" + ID, "ambiguous_request"),
    ("both_given_one_empty", "video_id=&video_url=x", "ambiguous_request"),
    ("video_id_repeated", "video_id=" + ID + "&video_id=" + ID, "ambiguous_request"),
    ("video_url_repeated", "video_url=https%3A%2F%2Fyoutu.be%2F" + ID + "&video_url=https%3A%2F%2Fyoutu.be%2F" + ID,
     "ambiguous_request"),
    # At most one of language and lang.
    ("language_and_lang", "video_id=" + ID + "&language=en&lang=en", "ambiguous_language"),
    ("language_repeated", "video_id=" + ID + "&language=en&language=de", "ambiguous_language"),
    ("lang_repeated", "video_id=" + ID + "&lang=en&lang=en", "ambiguous_language"),
    # video_id pattern.
    ("video_id_empty", "video_id=", "invalid_video_id"),
    ("video_id_without_value", "video_id", "invalid_video_id"),
    ("video_id_short", "video_id=abc", "invalid_video_id"),
    ("video_id_long", "video_id=" + ID + "x", "invalid_video_id"),
    ("video_id_bad_char", "video_id=aB3_-9zZ0x%21", "invalid_video_id"),
    ("video_id_bad_escape", "video_id=aB3_-9zZ0x%G1", "invalid_video_id"),
    ("video_id_plus_is_space", "video_id=aB3_-9zZ0x+", "invalid_video_id"),
    # video_url forms and hosts.
    ("video_url_empty", "video_url=", "invalid_video_url"),
    ("video_url_other_host", "video_url=https%3A%2F%2Fexample.com%2Fwatch%3Fv%3D" + ID, "invalid_video_url"),
    ("video_url_lookalike_suffix", "video_url=https%3A%2F%2Fyoutube.com.evil.com%2Fwatch%3Fv%3D" + ID,
     "invalid_video_url"),
    ("video_url_lookalike_prefix", "video_url=https%3A%2F%2Fevilyoutube.com%2Fwatch%3Fv%3D" + ID, "invalid_video_url"),
    ("video_url_userinfo", "video_url=https%3A%2F%2Fyoutube.com%40evil.com%2Fwatch%3Fv%3D" + ID, "invalid_video_url"),
    ("video_url_scheme", "video_url=ftp%3A%2F%2Fwww.youtube.com%2Fwatch%3Fv%3D" + ID, "invalid_video_url"),
    ("video_url_playlist", "video_url=https%3A%2F%2Fwww.youtube.com%2Fplaylist%3Flist%3DPLabcdefghij",
     "invalid_video_url"),
    ("video_url_channel", "video_url=https%3A%2F%2Fwww.youtube.com%2F%40somechannel", "invalid_video_url"),
    ("video_url_bad_id", "video_url=https%3A%2F%2Fyoutu.be%2Fabc", "invalid_video_url"),
    ("video_url_bad_escape", "video_url=https%3A%2F%2Fyoutu.be%2F" + ID + "%", "invalid_video_url"),
    # language pattern.
    ("language_empty", "video_id=" + ID + "&language=", "invalid_language"),
    ("language_uppercase", "video_id=" + ID + "&language=EN", "invalid_language"),
    ("lang_underscore", "video_id=" + ID + "&lang=en_US", "invalid_language"),
    ("language_too_long", "video_id=" + ID + "&language=abc-abcdefghi", "invalid_language"),
    ("language_trailing_dash", "video_url=https%3A%2F%2Fyoutu.be%2F" + ID + "&language=en-", "invalid_language"),
]


@pytest.mark.parametrize("query,code", [(q, c) for _, q, c in CASES_400], ids=[n for n, _, _ in CASES_400])
def test_invalid_parameters_get_400_with_their_code(gateway, query, code):
    assert_error(get(gateway, query), 400, code, query)


# ARCHITECTURE.md order: ambiguous_request, ambiguous_language, invalid_video_id, invalid_video_url,
# invalid_language. Each query breaks its own rule and every later one.
ORDER_CASES = [
    ("video_id=bad&video_id=bad&language=X&lang=Y", "ambiguous_request"),
    ("language=X&lang=Y", "ambiguous_request"),
    ("video_id=bad&language=X&lang=Y", "ambiguous_language"),
    ("video_url=bad&lang=X&lang=X", "ambiguous_language"),
    ("video_id=bad&language=X", "invalid_video_id"),
    ("video_url=bad&language=X", "invalid_video_url"),
    ("language=X&video_id=" + ID, "invalid_language"),
]


@pytest.mark.parametrize("query,code", ORDER_CASES)
def test_first_failing_rule_in_the_documented_order_answers(gateway, query, code):
    assert_error(get(gateway, query), 400, code, query)


@pytest.mark.parametrize("key_kind", ["missing", "unknown", "revoked", "oversized"])
def test_bad_key_gets_401_before_parameter_validation(gateway, key_kind):
    headers = {
        "missing": {},
        "unknown": {"x-api-key": "vts_" + "0" * 64},
        "revoked": {"x-api-key": gateway.revoked_key},
        "oversized": {"x-api-key": gateway.key + "x" * 300},
    }[key_kind]
    path = PATH + "?video_id=bad&video_id=bad&language=X&lang=Y"
    r = gateway.request("GET", path, headers=headers)
    check_response("GET", path, r.status, r.headers, r.body)
    assert (r.status, r.json()) == (401, error_body("UNAUTHORIZED")), f"{key_kind} key: {r.status} {r.body[:200]!r}"
