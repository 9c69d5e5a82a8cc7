"""A request resolves to the track the video has: once a gateway holds the video's player summary, a language the video
lacks ("xx", "yyy", "zz-Zz", none at all) or another spelling of a track's language ("de-AT" for "de", "en-Zz" for
"en", "pt" for "pt-BR") is asked as the language of the track it is served. It costs no caption download and no
Redis entry of its own; a track not fetched yet costs its one download, shared by every spelling that reaches it.
Real gateway and fetcher, real redis-server, the fake platform counting requests per path."""
import pytest

from certs import Certs
from conftest import wait_for
from test_claims import fetchers
from test_redis_bounds import entries, gateway, get, started_redis, timedtext_requests
from test_several_gateways import player_requests

VIDEO = "mlangServ01"  # the fake platform's multiLang01: en (manual), en (asr), pt-BR, de; default de


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return Certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture
def redis():
    r = started_redis("counters.conf")
    yield r
    r.stop()


def served(gw, lang):
    query = "video_id=%s" % VIDEO + ("&language=%s" % lang if lang is not None else "")
    r = get(gw, query)
    assert r.status == 200, (lang, r.status, r.body[:200])
    return r.json()["language"]


def wait_for_keys(redis, n):
    return wait_for(lambda: len(entries(redis, VIDEO)) == n, 5)


def held(redis):
    """The video's Redis keys, after the video id: "=de#…" for a track, the language for an alias."""
    return sorted(k.split("}:", 1)[1] for k in entries(redis, VIDEO))


def test_spellings_of_a_language_the_video_lacks_cost_no_caption_download_nor_entry(tmp_path, certs, upstream,
                                                                                      redis):
    gw = gateway(tmp_path / "gw", certs, redis)
    try:
        with fetchers(tmp_path, certs, upstream, [gw], 1):
            upstream.reset()
            assert served(gw, "de") == "de"
            assert (player_requests(upstream, VIDEO), timedtext_requests(upstream, VIDEO)) == (1, 1)
            # Written to Redis as the answer goes out: the track and the alias of "de".
            assert wait_for_keys(redis, 2)
            de_track = [k for k in held(redis) if k.startswith("=de#")]
            assert held(redis) == sorted(de_track + ["de"]) and len(de_track) == 1, held(redis)

            # Languages the video lacks, no language, and another region of "de": the default track, "de", held.
            for lang in ("xx", "yyy", "zz-Zz", "qaa-Latn", None, "de-AT", "de-at"):
                assert served(gw, lang) == "de", lang
            assert (player_requests(upstream, VIDEO), timedtext_requests(upstream, VIDEO)) == (1, 1)
            assert held(redis) == sorted(de_track + ["de"])

            # A spelling that reaches a track not fetched yet: that track's one download, under its own language.
            assert served(gw, "en-Zz") == "en"
            assert (player_requests(upstream, VIDEO), timedtext_requests(upstream, VIDEO)) == (1, 2)
            for lang in ("en", "en-US", "en-gb"):
                assert served(gw, lang) == "en", lang
            assert served(gw, "pt") == "pt-BR"
            for lang in ("pt-BR", "pt-PT", "pt-br"):
                assert served(gw, lang) == "pt-BR", lang
            assert (player_requests(upstream, VIDEO), timedtext_requests(upstream, VIDEO)) == (1, 3)
            assert wait_for_keys(redis, 6)
            tracks = [k for k in held(redis) if k.startswith("=")]
            assert sorted(k.split("#")[0] for k in tracks) == ["=de", "=en", "=pt-BR"], held(redis)
            assert held(redis) == sorted(tracks + ["de", "en", "pt-BR"])
            # Each caption download asked the track it served, once.
            assert [(q["lang"][0], q.get("tlang", [""])[0]) for q in upstream.stats()["timedtext"][VIDEO]] == \
                [("de", ""), ("en", ""), ("pt-BR", "")]
    finally:
        gw.stop()


def test_a_spelling_asked_first_leaves_its_track_language_holding_the_answer(tmp_path, certs, upstream, redis):
    """Asked first as "xx" (no tracks known yet): one download, and "de", the language served, holds the answer too
    in the gateway's memory, so "de" and every later spelling cost nothing more; Redis holds the track and the alias of
    the job that fetched it."""
    gw = gateway(tmp_path / "gw", certs, redis)
    try:
        with fetchers(tmp_path, certs, upstream, [gw], 1):
            upstream.reset()
            assert served(gw, "xx") == "de"
            for lang in ("de", "yyy", None, "de-CH"):
                assert served(gw, lang) == "de", lang
            assert (player_requests(upstream, VIDEO), timedtext_requests(upstream, VIDEO)) == (1, 1)
            assert wait_for_keys(redis, 2)
            track = [k for k in held(redis) if k.startswith("=de#")]
            assert len(track) == 1 and held(redis) == sorted(track + ["xx"]), held(redis)
    finally:
        gw.stop()


# Spellings of English and languages the twin video lacks; every one is served a track the video holds.
TWIN_SPELLINGS = ["en", "en-US", "en-GB", "en-gb", "en-AU", "en-Zz", "xx", "yyy", "zz-Zz", "qaa-Latn", None, "de", "fr",
                  "es", "es-MX"]
MANUAL, ASR = "Hello and welcome to the fake platform", "hello and welcome to the fake platform automatic"


def served_track(gw, video, lang):
    """The answer's language and text (the manual and the auto-generated twin differ in their words)."""
    query = "video_id=%s" % video + ("&language=%s" % lang if lang is not None else "")
    r = get(gw, query)
    assert r.status == 200, (lang, r.status, r.body[:200])
    body = r.json()
    return body["language"], body["text"]


@pytest.mark.parametrize("video,default", [("twinM000001", MANUAL), ("twinA000001", ASR)])
def test_spellings_on_a_video_with_twin_tracks_cost_only_the_tracks_served(tmp_path, certs, upstream, redis, video,
                                                                          default):
    """A manual and an auto-generated English track: a spelling of English is served the manual one, a language the
    video lacks the default track, which may be either twin. Each track served costs its one caption download."""
    gw = gateway(tmp_path / "gw", certs, redis)
    try:
        with fetchers(tmp_path, certs, upstream, [gw], 1):
            upstream.reset()
            first = {lang: served_track(gw, video, lang) for lang in TWIN_SPELLINGS}
            fetched = (player_requests(upstream, video), timedtext_requests(upstream, video))
            assert {lang: served_track(gw, video, lang) for lang in TWIN_SPELLINGS} == first
    finally:
        gw.stop()
    for lang in ("en", "en-US", "en-GB", "en-gb", "en-AU", "en-Zz"):
        assert first[lang] == ("en", MANUAL), lang
    for lang in ("xx", "yyy", "zz-Zz", "qaa-Latn", None, "de", "fr"):
        assert first[lang] == ("en", default), lang
    assert first["es"][0] == first["es-MX"][0] == "es"
    # One player request, one caption download per track served: en (or its twin too) and es.
    assert fetched == (1, len(set(first.values()))) == (1, 2 if default == MANUAL else 3), fetched


def spellings(n):
    """n spellings: of English (regions), of Spanish, and of languages the video lacks."""
    regions = ["%s%s" % (a, b) for a in "ABCDEFGHIJ" for b in "KLMNOPQRSTUVWXYZ"]
    out = ["en", "es", "xx", None]
    i = 0
    while len(out) < n:
        out += ["en-" + regions[i], "es-" + regions[i], "x%s" % regions[i].lower(), "q%s" % regions[i].lower()[:2]]
        i += 1
    return out[:n]


def test_a_hundred_spellings_through_four_gateways_sharing_redis_cost_three_downloads(tmp_path, certs, upstream,
                                                                                        redis):
    video = "twinA000002"
    gws = [gateway(tmp_path / ("gw%d" % i), certs, redis) for i in range(4)]
    try:
        with fetchers(tmp_path, certs, upstream, gws, 1):
            upstream.reset()
            langs = spellings(100)
            answers = {lang: served_track(gws[0], video, lang) for lang in langs}
            fetched = (player_requests(upstream, video), timedtext_requests(upstream, video))
            print("\n100 spellings of a twin-track video through one gateway of four sharing Redis: %d platform "
                  "requests (%d player, %d caption)" % (sum(fetched), *fetched))
            # The other gateways: what the first fetched, through Redis (a language the video lacks would be asked
            # as it came there, not holding the video's player summary: one fetch, kept for that spelling).
            for gw in gws[1:]:
                for lang in ("en", "es"):
                    assert served_track(gw, video, lang) == answers[lang], lang
            after = (player_requests(upstream, video), timedtext_requests(upstream, video))
    finally:
        for gw in gws:
            gw.stop()
    assert len(set(answers.values())) == 3
    assert fetched == (1, 3), fetched
    assert after == fetched
