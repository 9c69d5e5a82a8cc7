"""translate=xx on the transcript endpoint end to end: the chosen track fetched translated by the platform (tlang, sent
once), the answer in xx, 404 when the track is not translatable or xx not offered, cached apart from the untranslated
transcript."""

import pytest

from conftest import shared_fixtures
from stack import Stack

NOT_AVAILABLE = (b'{"error":{"code":"transcript_not_available",'
                 b'"message":"No accessible transcript was found for this video."}}')


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    captures = shared_fixtures("youtube-transcript-api")
    s = Stack(tmp_path_factory.mktemp("translation"), upstream_args=["--captures", captures])
    yield s
    s.close()


def tlangs(stack, video):
    """The tlang values of each timedtext request for video, in order (a request without one gives [])."""
    return [q.get("tlang", []) for q in stack.upstream.stats()["timedtext"].get(video, [])]


def player_requests(stack, video):
    return stack.requests().get("POST /youtubei/v1/player " + video, 0)


def test_translation_answers_in_the_target_language_with_tlang_sent_once(stack):
    stack.upstream.reset()
    r = stack.get(query="video_id=multiLang01&language=en&translate=fr")
    assert r.status == 200, r
    assert r.json() == {"language": "fr", "source": "captions", "text": "Bonjour et bienvenue sur la fausse plateforme",
                        "segments": [{"text": "Bonjour et bienvenue", "start": 0.12, "duration": 2.4},
                                     {"text": "sur la fausse plateforme", "start": 2.52, "duration": 3}]}
    assert tlangs(stack, "multiLang01") == [["fr"]]
    # The English manual track was the one translated.
    query = stack.upstream.stats()["timedtext"]["multiLang01"][0]
    assert query["lang"] == ["en"] and "kind" not in query


def test_a_translation_is_cached_and_apart_from_the_original(stack):
    stack.upstream.reset()
    first = stack.get(query="video_id=benchTrn001&translate=es")
    assert first.status == 200, first
    assert first.json()["language"] == "es" and first.json()["text"] == "Hola y bienvenidos a la plataforma falsa"
    again = stack.get(query="video_id=benchTrn001&translate=es")
    assert again.status == 200 and again.body == first.body
    assert player_requests(stack, "benchTrn001") == 1
    assert tlangs(stack, "benchTrn001") == [["es"]]
    original = stack.get(query="video_id=benchTrn001")
    assert original.status == 200, original
    assert original.json()["language"] == "en" and original.json()["text"] == "Hello and welcome to the fake platform"
    assert tlangs(stack, "benchTrn001") == [["es"], []]
    other = stack.get(query="video_id=benchTrn001&translate=fr")
    assert other.json()["language"] == "fr"
    assert tlangs(stack, "benchTrn001") == [["es"], [], ["fr"]]


def test_the_requested_language_chooses_the_track_that_is_translated(stack):
    stack.upstream.reset()
    r = stack.get(query="video_id=multiLang01&lang=pt-BR&translate=zh-Hant")
    assert r.status == 200, r
    body = r.json()
    assert body["language"] == "zh-Hant"
    assert [s["text"] for s in body["segments"]] == ["[zh-Hant] Olá e bem-vindo", "[zh-Hant] à plataforma falsa"]
    query = stack.upstream.stats()["timedtext"]["multiLang01"][0]
    assert query["lang"] == ["pt-BR"] and query["tlang"] == ["zh-Hant"]


@pytest.mark.parametrize("video,translate", [("mlangNoIt01", "it"), ("noTranslat1", "fr")])
def test_not_offered_or_not_translatable_is_404_without_a_caption_download(stack, video, translate):
    # mlang* (as multiLang01, fresh: no player reply of it is kept yet) does not offer Italian (German, its default
    # track's own language, is that track untranslated); noTranslat1's only track is not translatable.
    stack.upstream.reset()
    r = stack.get(query="video_id=%s&translate=%s" % (video, translate))
    assert r.status == 404, r
    assert r.body == NOT_AVAILABLE
    assert video not in stack.upstream.stats()["timedtext"]
    assert player_requests(stack, video) == 1, "the platform's refusal is the answer, for every client"
    assert stack.get(query="video_id=" + video).status == 200


def test_a_translation_into_the_tracks_own_language_is_the_track_without_tlang(stack):
    # As multiLang01 (fresh): its default track is German, and German is not among its translation languages.
    stack.upstream.reset()
    r = stack.get(query="video_id=mlangOwnDe1&translate=de")
    assert r.status == 200, r
    assert r.json()["language"] == "de"
    assert [s["text"] for s in r.json()["segments"]] == ["Hallo und willkommen", "auf der falschen Plattform"]
    assert tlangs(stack, "mlangOwnDe1") == [[]]
    assert player_requests(stack, "mlangOwnDe1") == 1


def test_a_video_without_captions_has_nothing_to_translate(stack):
    r = stack.get(query="video_id=noCaptions1&translate=fr")
    assert r.status == 404, r
    assert r.body == NOT_AVAILABLE


def test_the_language_is_matched_without_regard_to_case_and_answered_as_the_platform_writes_it(stack):
    stack.upstream.reset()
    r = stack.get(query="video_id=multiLang01&language=de&translate=zh-hant")
    assert r.status == 200, r
    assert r.json()["language"] == "zh-Hant"
    assert tlangs(stack, "multiLang01") == [["zh-Hant"]]


def test_the_real_translation_list_decides(stack):
    # realTracks1 offers the 18 translation languages of the captured reply: Arabic is one, Polish is not.
    r = stack.get(query="video_id=realTracks1&translate=ar")
    assert r.status == 200, r
    assert r.json()["language"] == "ar"
    r = stack.get(query="video_id=realTracks1&translate=pl")
    assert r.status == 404, r


def test_a_translation_in_another_format(stack):
    r = stack.get(query="video_id=multiLang01&language=en&translate=fr&format=srt")
    assert r.status == 200, r
    assert r.body == (b"1\n00:00:00,120 --> 00:00:02,520\nBonjour et bienvenue\n\n"
                      b"2\n00:00:02,520 --> 00:00:05,520\nsur la fausse plateforme\n\n")


@pytest.mark.parametrize("query,code,message", [
    ("video_id=multiLang01&translate=fr&translate=es", "ambiguous_language", "Give translate at most once."),
    ("video_id=multiLang01&translate=FR", "invalid_language",
     "translate must match ^[a-z]{2,3}(?:-[a-zA-Z]{2,8})?$."),
    ("video_id=multiLang01&translate=", "invalid_language",
     "translate must match ^[a-z]{2,3}(?:-[a-zA-Z]{2,8})?$."),
])
def test_translate_is_checked_like_a_language(stack, query, code, message):
    r = stack.get(query=query)
    assert r.status == 400, r
    assert r.json() == {"error": {"code": code, "message": message}}
