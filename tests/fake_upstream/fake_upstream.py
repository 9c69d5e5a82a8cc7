#!/usr/bin/env python3
"""A fake of the video platform for the fetcher's tests (standard library only).

    python3 fake_upstream.py --port N      (0 picks a free port; prints "READY <port>" once listening)

It serves the shapes of the real platform, written from scratch after the captures in ../shared/fixtures: the
watch page (with its consent wall and its recaptcha page), POST /youtubei/v1/player, /api/timedtext in json3, srv3
and srv1, and an audio URL. Caption baseUrls name https://www.youtube.com, as the real ones do, so the fetcher's
mapping onto VTS_UPSTREAM_URL is exercised by every test.

The scenario is chosen by the video id (11 characters):

| video id    | watch page                         | player (POST /youtubei/v1/player)              | timedtext            |
|-------------|------------------------------------|------------------------------------------------|----------------------|
| capJson3xx1 | normal                             | OK, one manual "en" track                      | json3 (gzip if asked)|
| capSrv3xxx1 | normal                             | OK, one asr "en" track                         | srv3 whatever fmt    |
| capSrv1xxx1 | normal                             | OK, one manual "en" track                      | srv1 whatever fmt    |
| multiLang01 | normal                             | OK: en manual, en asr, pt-BR, de; default de   | json3, text per track|
| fourLangs01 | normal                             | OK: en, es, ja, pt-BR manual tracks            | json3, text per track|
| twinM*      | normal                             | OK: en manual, en asr, es; default en manual   | json3, text per track|
| twinA*      | normal                             | OK: en manual, en asr, es; default en asr      | json3, text per track|
| noTranslat1 | normal                             | OK: one "en" track with isTranslatable false   | json3                |
| consentOk01 | consent wall with v, then normal   | OK like capJson3xx1                            | json3                |
|             | once CONSENT=YES+<v> is sent       |                                                |                      |
| consentBad1 | consent wall without v             | 403 for every client                           | -                    |
| recaptcha01 | recaptcha page                     | 429 for every client                           | -                    |
| http429xxx1 | 429                                | 429 for every client                           | -                    |
| http500xxx1 | normal                             | 500 for every client                           | -                    |
| botCheck001 | normal                             | LOGIN_REQUIRED "Sign in to confirm you're not  | -                    |
|             |                                    | a bot" for every client                        |                      |
| ageRestr001 | normal                             | LOGIN_REQUIRED "inappropriate for some users"  | -                    |
| unavail0001 | normal                             | ERROR "This video is unavailable"              | -                    |
| unplayable1 | normal                             | UNPLAYABLE                                     | -                    |
| liveOffline | normal                             | LIVE_STREAM_OFFLINE                            | -                    |
| noCaptions1 | normal                             | OK, no captions; audio formats whose url is    | -                    |
|             |                                    | this server's /videoplayback                   |                      |
| poToken0001 | normal                             | OK, every track's baseUrl has exp=xpe          | json3 with a token   |
| potMixed001 | normal                             | OK: en (exp=xpo,xpe), de (no exp); default en  | json3, en with token |
| potLangs001 | normal                             | OK: en (exp=xpe), de (exp=xpo,xpv), es         | json3 with a token   |
|             |                                    | (exp=xpe): every track wants a token           |                      |
| slowPlayer1 | normal                             | OK after SLOW_SECONDS                          | json3                |
| slow*       | normal                             | any id starting with "slow": as slowPlayer1    | json3                |
|             |                                    | (distinct slow jobs for drain and stop tests)  |                      |
| lazy*       | normal                             | any id starting with "lazy": OK after          | json3                |
|             |                                    | LAZY_SECONDS                                   |                      |
| hangPlayer1 | normal                             | never answers (until the client gives up)      | -                    |
| truncated01 | normal                             | OK                                             | Content-Length larger|
|             |                                    |                                                | than the body, closed|
| oversizePl1 | normal                             | 200 with a body past the 8 MiB cap             | -                    |
| oversizeCap | normal                             | OK                                             | chunked, past the cap|
| malformed01 | normal                             | 200 with malformed JSON                        | -                    |
| long1500seg | normal                             | OK                                             | json3, 1,500 cues    |
| chaptLong01 | normal                             | OK, lengthSeconds 1200, chapters (see below)   | json3, 600 cues      |
| chaptShort1 | normal                             | OK, chapters (see below)                       | json3                |
| chaptOnce01 | normal                             | as chaptShort1 (a video no other test asks)    | json3                |
| chaptFail01 | normal                             | OK; its watch-next call answers 500            | json3                |
| longHour248 | normal                             | OK                                             | json3, 248 KB body   |
| clientRefus | normal                             | 403 for VISIONOS, OK for any other client      | json3                |
| redirEvil01 | normal                             | 302 to https://evil.example.com/ (everyone)    | -                    |
| redirLoop01 | normal                             | 307 to itself, forever                         | -                    |
| redirOkxxx1 | normal                             | OK                                             | 302 to www.youtube.com|
|             |                                    |                                                | /api/timedtext, json3|
| dripPlayer1 | normal                             | 200, the body one byte per DRIP_INTERVAL_S     | -                    |
| resetPlayer | normal                             | 200, half the body, then a TCP reset           | -                    |
| huge100mb01 | normal                             | 200 chunked, HUGE_BYTES with no length given   | -                    |
| huge100mbCL | normal                             | 200, Content-Length: HUGE_BYTES, streamed      | -                    |

Speech scenarios (the fallback for videos without captions). With --audio-m4a FILE [--audio-webm FILE]
--audio-duration-ms N, /videoplayback serves those files (itag 140 the m4a, 249/251 the webm) with Range support,
and the audio formats of the player reply carry their real sizes and duration:

| noCaptions1 | normal | OK, no captions; audio formats on this server's /videoplayback               |
| noAudio0001 | normal | OK, no captions, no audio formats                                             |
| speechLong1 | normal | OK, no captions; audio formats declaring 10 hours                             |
| audio403xx1 | normal | OK, no captions; /videoplayback answers 403                                   |

Client-specific refusals (the client named in the player request body decides the reply; caption baseUrls then
carry c=<clientName>, as the platform's do):

| visionUnpl1 | normal | UNPLAYABLE ("made for kids") for VISIONOS, OK with one "en" track for others |
| vunpl*      | normal | any id starting with "vunpl": as visionUnpl1 (fresh ids for benchmarks)      |
| visionXpv01 | normal | OK for all; VISIONOS's tracks carry exp=xpv (a PO token is wanted)            |
| emptyCap001 | normal | OK for all; the caption URL answers an empty 200 to VISIONOS's track           |
| cap403First | normal | OK for all; the caption URL answers 403 to VISIONOS's track                    |

The Android app's reel call and the visitor call it depends on (both on youtubei.googleapis.com, which the fetcher
maps onto this server with that host in its Host header):

  POST /youtubei/v1/visitor_id   answers {"responseContext": {"visitorData": V}} with a fresh V each call (issued
                                 ones are remembered); counted as "POST /youtubei/v1/visitor_id".
  POST /youtubei/v1/reel/reel_item_watch
                                 the player request nested under "playerRequest" (its videoId, beside
                                 "disablePlayerResponse"), query id=<that id> and $fields=playerResponse. A body
                                 without the playerRequest object is answered 400 INVALID_ARGUMENT (as the platform
                                 answers a malformed request); one whose context.client.visitorData is missing,
                                 is not a value the visitor call issued exactly as issued (its padding still
                                 percent-encoded), or differs from its X-Goog-Visitor-Id header gets the player reply refused ("UNPLAYABLE",
                                 "This video is not available", as the platform refuses a client it does not trust,
                                 the captured VISIONOS refusal's wording). Otherwise the reply is {"playerResponse":
                                 <what the player call answers for that id and client>}, its audio formats without
                                 any url (the reel reply's formats are SABR only: serverAbrStreamingUrl), and `{}`
                                 for the id reelNone001 (the platform's answer to an id it does not know). Counted as
                                 "POST /youtubei/v1/reel/reel_item_watch <id>".

Chapters (POST /youtubei/v1/next, the watch-next call): the reply has the platform's shape (responseContext,
contents, playerOverlays, then engagementPanels, each an engagementPanelSectionListRenderer found by its
panelIdentifier). A video of NEXT_CHAPTERS gets the chapters panel ("engagement-panel-macro-markers-description-
chapters": macroMarkersListRenderer.contents[].macroMarkersListItemRenderer with title.simpleText, timeDescription
and onTap.watchEndpoint.startTimeSeconds) among a comments panel and a key-moments panel of markers that are not
chapters; any other video gets the panels without chapters, but chaptFail01 (a playable video) a 500. A body without
videoId is 400 INVALID_ARGUMENT. Counted
as "POST /youtubei/v1/next <id>".

The visitor data issued so far are listed under "visitors" in /__stats, with the monotonic second each was issued
under "visitor_times" (never cleared: a fetcher keeps what it was given). Every POST to /youtubei/v1/ is recorded
whole under "calls" in /__stats, in order: {"host" (the Host header), "path", "query" (parsed), "body" (parsed JSON,
or null), "headers" (every request header but Host, Content-Length, Accept-Encoding and Connection)}.

PO tokens: a track whose baseUrl's exp list holds xpe or xpv is served, as by the platform, only with a pot parameter
issued for its video by the fake PO-token provider (fake_pot_provider.py, token_valid) and not yet expired; otherwise
its timedtext answer is an empty 200. Tracks without them are served as always, whatever pot they carry.

Blocking by egress address: with --block-source ADDR (repeatable) and --block-mode 429|recaptcha, every request
arriving from ADDR gets a 429 (mode 429) or, for the watch page, the recaptcha page and for the player a 429 (mode
recaptcha). Requests are also counted by source address under "sources" in /__stats (with the monotonic second of
each arrival under "source_times", for the pacing benchmark), and blocked ones under
"blocked". The player's X-YouTube-Client-Name header is recorded under "client_ids" per video, and its
context.client with the User-Agent and X-YouTube-Client-Version headers under "contexts".

The platform's rationing (each reply below is a real capture read at start with only the field in question changed;
they need --captures):
  --ration-limit N       per source address, player and watch page requests are counted per window of
                         --ration-window-s (default 3600, from the server's start); past N in a window the player is
                         answered with the rationing reply: the captured VISIONOS refusal of
                         ../newpipe/reel/*/*-player-unplayable.visionos.json, its playabilityStatus.reason made
                         RATION_REASON and its videoDetails.videoId the id asked (the page is still served). Counted
                         under "rationed" per source in /__stats.
  --throttle-tlang N     per source address, timedtext requests with tlang are counted per window apart; past N they
                         are answered 429 (--tlang-throttle-mode 429, the default) or an empty 200 (empty). Counted
                         under "tlang_throttled" per source.
  --wrong-video ID       (repeatable) the player request for ID is answered with another video's reply: the captured
                         ANDROID reply youtube.innertube.json.static as it is (its own videoId and caption tracks).
  --outdated-client NAME (repeatable) every player request of client NAME is answered with the retired-client reply:
                         the captured VISIONOS refusal, its reason made OUTDATED_REASON, its videoId the id asked.
POST /__reset clears these counts too.

Translation: every OK reply lists translationLanguages (fr, es, zh-Hant; or the captured list below), and a timedtext
URL with tlang=xx answers the track's cues translated into xx (TRANSLATED, or the text prefixed with "[xx] "), as the
platform translates a translatable track. Every timedtext query, tlang included, is recorded under "timedtext".

Ids that start with "bench" behave as capJson3xx1 (benchmarks use fresh ids for cache misses), and those that start
with "mlang" as multiLang01. Ids that start with "stale" behave as multiLang01 too, and their caption URLs carry a
generation (gen=N): POST /__renew?v=ID starts a new one, and timedtext answers 404 to the URLs of older ones, as the
platform refuses caption URLs past their expire.
Any other id of 11 characters behaves as ERROR "This video is unavailable".

With --captures DIR (the youtube-transcript-api folder of ../shared/fixtures), four more ids serve the real
captured pages, read at start and never copied into the project; their player is OK like capJson3xx1:

| realWatch01 | the captured watch page (its INNERTUBE_API_KEY is then the only key accepted for it)     |
| realConsent | the captured consent wall until CONSENT=YES+<its v> is sent, then the captured watch page |
| realConsBad | the captured consent wall without v                                                       |
| realRecapt1 | the captured recaptcha page                                                               |
| realTracks1 | player OK with the caption tracks and translationLanguages of the captured ANDROID reply  |
|             | (youtube.innertube.json.static: 9 tracks, 18 translation languages)                       |
| realTracks2 | the same from the VISIONOS capture ../newpipe/audiotracklanguage.player.json               |
| realPoTokn1 | the same from youtube_po_token_required.innertube.json.static, each baseUrl keeping the    |
|             | capture's exp (its manual "en" track has exp=xpe: served only with a PO token)             |
| realMeta001 | player: the captured reply ../newpipe/descriptionunboxing.player.json, whole (videoDetails|
|             | with 40 keywords and a long description), caption baseUrls made this server's             |
| realMeta002 | the same from the player reply the captured watch page embeds (with its microformat)      |
| realPrivat1 | player: the captured private-video refusal (../newpipe/reel/*/*-private.reel.json, the   |
|             | player reply the reel reply wraps), for every client                                      |
| realMember1 | the same, members-only (../newpipe/reel/*/members-only.reel.json)                         |
| realGeoRes1 | the same, not in the recorder's country (../newpipe/reel/*/geo-restricted.reel.json)      |
| realAgeRes1 | player: the captured age-restricted refusal (youtube_age_restricted.innertube.json.static)|
| realUnavai1 | player: the captured unavailable refusal (youtube_video_unavailable.innertube.json.static)|

Playlists and channels (POST /youtubei/v1/browse), with --captures: the recorded browse exchanges of
../newpipe/playlist and ../newpipe/channel are read at start and each reply is served, as recorded (status and
body), to the request that asks what its recorded request asked:
  - {"browseId": B, ...}: the capture whose request named browseId B (the $fields metadata captures excepted);
  - {"continuation": T}: the capture whose request sent T (a continuation a recorded reply holds, or the first-page
    token a client builds for a playlist); a client-built first-page token that no capture sent is read (base64url
    of a protobuf naming "VL" + the playlist id) and answered as a browse of that "VL" id.
A playlist no capture names answers the recorded "The playlist does not exist." reply, a channel id no capture
names the recorded HTTP 400, a continuation no capture sent a 400 INVALID_ARGUMENT, a playlist whose id starts
with "PLprivate" the recorded "does not exist" reply with only its alert's text made "This playlist is private.",
and a playlist whose id starts with "PLfail500" a 500 (a platform failure). POST /__browse_hold makes every request for a page after a first
one (a continuation a recorded reply holds) wait until POST /__browse_release (60 s at most); each one held is
counted under "POST /youtubei/v1/browse held". Every browse request is counted under "POST /youtubei/v1/browse",
and a first-page token that no capture sent (read to its "VL" id) under "POST /youtubei/v1/browse token read".
Lists whose pages never end, made up (no capture needed): a playlist whose id starts with "PLendless" answers every
page with ENDLESS_PAGE new ids ("e" + the page number in 6 digits + the position in 4) and a continuation to the next
page; one whose id starts with "PLsameids" answers every page with the same ENDLESS_PAGE ids ("s0000000000" to
"s0000000009") and a continuation. Each such page is counted under "POST /youtubei/v1/browse endless".

The captured tracks keep every field but baseUrl, which is made for this server (v=<the id>, lang, kind) so that
their timedtext requests are served and counted here.

A player request that carries ?key= must carry the key of the watch page (else 400, as the platform answers a bad
key). Every request is counted per "METHOD path video"; GET /__stats returns
    {"requests": {"POST /youtubei/v1/player capJson3xx1": 1, ...},
     "clients": {"clientRefus": ["VISIONOS:1.02", "ANDROID:20.10.38"]},
     "player_keys": {"consentOk01": ["AIza..."]}, "player_visitor": {"consentOk01": [true]},
     "timedtext": {"capJson3xx1": [{"v": ["capJson3xx1"], "fmt": ["json3"], ...}]},
     "cookies": {"consentOk01": ["", "CONSENT=YES+..."]}}
and POST /__reset clears it. The hostile scenarios (dripPlayer1, resetPlayer, huge100mb*) also record the body
bytes they managed to send, per video, under "sent": {"huge100mb01": [8519680, ...]}.
"""

import argparse
import base64
import glob
import gzip
import json
import os
import re
import socket
import struct
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler

import fake_pot_provider
import fakeserver

SLOW_SECONDS = 1.5
LAZY_SECONDS = 3.0
HANG_MAX_SECONDS = 60
DRIP_INTERVAL_S = 0.1
HUGE_BYTES = 100 * 1000 * 1000
OVERSIZE_BYTES = 9 * 1024 * 1024
API_KEY = "AIzaSyFakeKeyForTests0123456789abcdefgh"
VISITOR_DATA = "CgtGYWtlVmlzaXRvcijAgICABjIKCgJVUxIEGgAgZA%3D%3D"
CONSENT_V = "cb.20250115-07-p0.en+FX+412"
PLATFORM = "https://www.youtube.com"

# Text of each caption track, by (language, kind).
TRACK_TEXT = {
    ("en", ""): ["Hello and welcome", "to the fake platform"],
    ("en", "asr"): ["hello and welcome", "to the fake platform automatic"],
    ("pt-BR", ""): ["Olá e bem-vindo", "à plataforma falsa"],
    ("de", ""): ["Hallo und willkommen", "auf der falschen Plattform"],
    ("es", ""): ["Hola y bienvenidos", "a la plataforma falsa"],
    ("ja", ""): ["こんにちは、ようこそ", "偽のプラットフォームへ"],
}

# Text of a track translated by the platform (tlang), by target language.
TRANSLATED = {
    "fr": ["Bonjour et bienvenue", "sur la fausse plateforme"],
    "es": ["Hola y bienvenidos", "a la plataforma falsa"],
}

TRANSLATION_LANGUAGES = [("fr", "French"), ("es", "Spanish"), ("zh-Hant", "Chinese (Traditional)")]


def track_url(video, lang, kind="", fmt="srv3", po_token=False, client=None, exp="xpe"):
    """A baseUrl in the shape of the real ones: signed parameters, then lang (and kind), then fmt."""
    params = [
        ("v", video), ("ei", "q1FakeEi0123456789abc"), ("caps", "asr"), ("opi", "112496729"), ("xoaf", "5"),
        ("hl", "en"), ("ip", "0.0.0.0"), ("ipbits", "0"), ("expire", "1893456000"),
        ("sparams", "ip,ipbits,expire,v,ei,caps,opi,xoaf"),
        ("signature", "0A1B2C3D4E5F60718293A4B5C6D7E8F901234567.89ABCDEF0123456789ABCDEF0123456789ABCDEF"),
        ("key", "yt8"),
    ]
    if po_token:
        params.append(("exp", exp))
    if video.startswith("stale"):
        params.append(("gen", str(CAPTION_GEN.get(video, 0))))
    if client:
        params.append(("c", client))
    if kind:
        params.append(("kind", kind))
    params.append(("lang", lang))
    if fmt:
        params.append(("fmt", fmt))
    return PLATFORM + "/api/timedtext?" + urllib.parse.urlencode(params, safe=",")


def caption_track(video, lang, name, kind="", po_token=False, client=None, exp="xpe", translatable=True):
    track = {
        "baseUrl": track_url(video, lang, kind, po_token=po_token, client=client, exp=exp),
        "name": {"runs": [{"text": name}]},
        "vssId": ("a." if kind == "asr" else ".") + lang,
        "languageCode": lang,
        "isTranslatable": translatable,
        "trackName": "",
    }
    if kind:
        track["kind"] = kind
    return track


AUDIO = {}  # itag -> bytes, from --audio-m4a / --audio-webm
# Videos "stale*": the generation of their caption URLs; POST /__renew?v=ID makes the URLs given so far answer 404.
CAPTION_GEN = {}
AUDIO_DURATION_MS = [12480]


def audio_formats(origin, video):
    def fmt(itag, mime, bitrate, clen, default=True):
        if itag in AUDIO:
            clen = len(AUDIO[itag])
        dur_ms = AUDIO_DURATION_MS[0] if video != "speechLong1" else 36000000
        query = urllib.parse.urlencode({
            "expire": "1893456000", "ei": "q1FakeEi0123456789abc", "id": "o-Fake" + video, "itag": str(itag),
            "source": "youtube", "requiressl": "yes", "mime": mime.split(";")[0], "clen": str(clen),
            "dur": "%.3f" % (dur_ms / 1000), "c": "VISIONOS"})
        f = {
            "itag": itag, "url": origin + "/videoplayback?" + query, "mimeType": mime, "bitrate": bitrate,
            "averageBitrate": bitrate - 1000, "contentLength": str(clen), "approxDurationMs": str(dur_ms),
            "lastModified": "1734377919135877", "quality": "tiny", "projectionType": "RECTANGULAR",
            "audioQuality": "AUDIO_QUALITY_LOW" if bitrate < 100000 else "AUDIO_QUALITY_MEDIUM",
            "audioSampleRate": "48000" if "opus" in mime else "44100", "audioChannels": 2,
        }
        if not default:
            f["audioTrack"] = {"displayName": "Deutsch", "id": "de.4", "audioIsDefault": False}
        return f

    video_format = {
        "itag": 160, "url": origin + "/videoplayback?itag=160&id=o-Fake" + video,
        "mimeType": "video/mp4; codecs=\"avc1.4d400c\"", "bitrate": 110000, "width": 256, "height": 144,
        "contentLength": "170000", "approxDurationMs": "12480", "quality": "tiny", "fps": 30,
    }
    audio = [fmt(140, "audio/mp4; codecs=\"mp4a.40.2\"", 130000, 203000),
             fmt(249, "audio/webm; codecs=\"opus\"", 56000, 77000),
             fmt(251, "audio/webm; codecs=\"opus\"", 140000, 190000)]
    if AUDIO:
        # Offer only what /videoplayback can serve, as the platform does.
        audio = [f for f in audio if f["itag"] in AUDIO]
    return [video_format] + audio


def player_ok(origin, video, tracks=None, default_index=0, translations=None):
    reply = {
        "responseContext": {"visitorData": urllib.parse.unquote(VISITOR_DATA),
                            "serviceTrackingParams": [{"service": "GFEEDBACK",
                                                       "params": [{"key": "logged_in", "value": "0"}]}]},
        "playabilityStatus": {"status": "OK", "playableInEmbed": True,
                              "contextParams": "Q0FBU0FnZ0FJQUE9"},
        "streamingData": {"expiresInSeconds": "21540", "adaptiveFormats": audio_formats(origin, video)},
        "videoDetails": {"videoId": video, "title": "A fake video",
                         "lengthSeconds": str(NEXT_CHAPTERS[video][0]) if video in NEXT_CHAPTERS else "12", "channelId":
                         "UCfakechannel000000000000", "isOwnerViewing": False, "isCrawlable": True,
                         "allowRatings": True, "viewCount": "1234", "author": "Fake", "isPrivate": False,
                         "isUnpluggedCorpus": False, "isLiveContent": False},
        "playerConfig": {"audioConfig": {"loudnessDb": -1.2, "perceptualLoudnessDb": -15.2}},
        "trackingParams": "CAEQu2kiEwjFakeFakeFake",
    }
    if tracks:
        reply["captions"] = {"playerCaptionsTracklistRenderer": {
            "captionTracks": tracks,
            "audioTracks": [{"captionTrackIndices": list(range(len(tracks))),
                             "defaultCaptionTrackIndex": default_index, "hasDefaultTrack": True,
                             "captionsInitialState": "CAPTIONS_INITIAL_STATE_OFF_RECOMMENDED"}],
            "translationLanguages": translations if translations is not None else [
                {"languageCode": code, "languageName": {"runs": [{"text": name}]}}
                for code, name in TRANSLATION_LANGUAGES],
            "defaultAudioTrackIndex": 0,
        }}
    return reply


def player_error(status, reason, subreason=None):
    screen = {"playerErrorMessageRenderer": {"reason": {"runs": [{"text": reason}]},
                                             "icon": {"iconType": "ERROR_OUTLINE"}}}
    if subreason:
        screen["playerErrorMessageRenderer"]["subreason"] = {"runs": [{"text": subreason}]}
    return {
        "responseContext": {"visitorData": urllib.parse.unquote(VISITOR_DATA)},
        "playabilityStatus": {"status": status, "reason": reason, "errorScreen": screen,
                              "contextParams": "Q0FBU0FnZ0E="},
        "trackingParams": "CAAQu2kiEwjFakeFakeFake",
    }


def watch_page(video):
    cfg = {"INNERTUBE_API_KEY": API_KEY, "INNERTUBE_API_VERSION": "v1", "INNERTUBE_CLIENT_NAME": "WEB",
           "INNERTUBE_CLIENT_VERSION": "2.20250115.01.00", "INNERTUBE_CONTEXT_CLIENT_NAME": 1,
           "INNERTUBE_CONTEXT_CLIENT_VERSION": "2.20250115.01.00", "INNERTUBE_CONTEXT_HL": "en",
           "INNERTUBE_CONTEXT_GL": "US", "VISITOR_DATA": VISITOR_DATA, "HL": "en"}
    return ("<!DOCTYPE html><html style=\"font-size: 10px;font-family: Roboto, Arial, sans-serif;\" lang=\"en\" "
            "darker-dark-theme><head><title>A fake video - YouTube</title>"
            "<script nonce=\"fakeNonce\">var ytcfg={d:function(){return{}},set:function(){}};</script>"
            "<script nonce=\"fakeNonce\">ytcfg.set(" + json.dumps(cfg, separators=(",", ":")) + "); window.ytcfg.obfuscatedData_ = [];"
            "</script></head><body><div id=\"player\"></div><script nonce=\"fakeNonce\">"
            "var ytInitialPlayerResponse = {\"responseContext\":{\"visitorData\":\"" + VISITOR_DATA + "\"},"
            "\"videoDetails\":{\"videoId\":\"" + video + "\"}};</script></body></html>")


def consent_page(with_v):
    inputs = [("gl", "US"), ("m", "0"), ("pc", "yt"), ("continue", PLATFORM + "/watch?v=consentOk01"),
              ("ca", "r"), ("x", "8")]
    if with_v:
        inputs.append(("v", CONSENT_V))
    inputs += [("t", "ADw3FakeToken:1736900000000"), ("hl", "en"), ("src", "1"), ("uxe", "24020387")]
    fields = "".join("<input type=\"hidden\" name=\"%s\" value=\"%s\">" % kv for kv in inputs)
    return ("<!DOCTYPE html><html lang=\"en\"><head><title>Before you continue to YouTube</title></head><body>"
            "<div class=\"signin\"><a href=\"https://accounts.google.com/ServiceLogin\">Sign in</a></div>"
            "<div class=\"box\"><p>We use cookies and data to deliver and maintain Google services.</p>"
            "<form action=\"https://consent.youtube.com/s\" method=\"POST\" style=\"display:inline;\">" + fields +
            "<input type=\"submit\" value=\"Accept all\" class=\"button\" aria-label=\"Accept the use of cookies\"/>"
            "</form></div><div class=\"footer\"><form action=\"https://consent.youtube.com/ml\" method=\"get\">"
            "<select id=\"languageselect\" name=\"hl\"><option value=\"en\">English</option></select></form>"
            "</div></body></html>")


RECAPTCHA_PAGE = (
    "<html><head><meta http-equiv=\"content-type\" content=\"text/html; charset=utf-8\"/>"
    "<script src=\"https://www.google.com/recaptcha/api.js\" async defer></script><title>YouTube</title>"
    "<style>.g-recaptcha { display: inline-block; }</style></head><body><div id=\"captcha-page\">"
    "<p>Sorry for the interruption. We have been receiving a large volume of requests from your network.</p>"
    "<p>To continue with your YouTube experience, please fill out the form below.</p>"
    "<form action=\"/das_captcha?fw=1\" method=\"POST\"><div class=\"g-recaptcha\" "
    "data-sitekey=\"6LfFakeSiteKey000000000000000000000000000\"></div><br/><input type=\"hidden\" "
    "name=\"action_recaptcha_verify2\" value=\"1\"/><input type=\"hidden\" name=\"next\" "
    "value=\"/watch?v=recaptcha01\"/><input type=\"submit\" value=\"Submit\"/></form></div></body></html>")


def json3_body(cues):
    """cues: list of (start_ms, dur_ms, text); a window record first and a line-break append as the platform does."""
    events = [{"tStartMs": 0, "dDurationMs": cues[-1][0] + cues[-1][1], "id": 1, "wpWinPosId": 1,
               "wsWinStyleId": 1}]
    for i, (start, dur, text) in enumerate(cues):
        words = text.split(" ")
        segs = [{"utf8": words[0], "acAsrConf": 0}]
        segs += [{"utf8": " " + w, "tOffsetMs": 200 * (j + 1), "acAsrConf": 0} for j, w in enumerate(words[1:])]
        events.append({"tStartMs": start, "dDurationMs": dur, "wWinId": 1, "segs": segs})
        if i + 1 < len(cues):
            events.append({"tStartMs": start + dur, "dDurationMs": 10, "wWinId": 1, "aAppend": 1,
                           "segs": [{"utf8": "\n"}]})
    return json.dumps({"wireMagic": "pb3", "pens": [{}], "wsWinStyles": [{}, {"mhModeHint": 2, "juJustifCode": 0,
                       "sdScrollDir": 3}], "wpWinPositions": [{}, {"apPoint": 6, "ahHorPos": 20,
                       "avVerPos": 100, "rcRows": 2, "ccCols": 40}], "events": events}, ensure_ascii=False)


def srv3_body(cues):
    paras = []
    for start, dur, text in cues:
        words = text.split(" ")
        spans = "<s ac=\"0\">%s</s>" % xml_escape(words[0])
        spans += "".join("<s t=\"%d\" ac=\"0\"> %s</s>" % (200 * (j + 1), xml_escape(w))
                         for j, w in enumerate(words[1:]))
        paras.append("<p t=\"%d\" d=\"%d\" w=\"1\">%s</p>" % (start, dur, spans))
    return ("<?xml version=\"1.0\" encoding=\"utf-8\" ?><timedtext format=\"3\">\n<head>\n"
            "<ws id=\"0\"/>\n<ws id=\"1\" mh=\"2\" ju=\"0\" sd=\"3\"/>\n<wp id=\"0\"/>\n"
            "<wp id=\"1\" ap=\"6\" ah=\"20\" av=\"100\" rc=\"2\" cc=\"40\"/>\n</head>\n<body>\n"
            "<w t=\"0\" id=\"1\" wp=\"1\" ws=\"1\"/>\n" + "\n".join(paras) + "\n</body>\n</timedtext>\n")


def srv1_body(cues):
    # The platform escapes the text once for XML, and the text of many tracks arrives already escaped once.
    items = "".join("<text start=\"%s\" dur=\"%s\">%s</text>" % (ms_to_s(start), ms_to_s(dur),
                                                                  xml_escape(xml_escape(text)))
                    for start, dur, text in cues)
    return "<?xml version=\"1.0\" encoding=\"utf-8\" ?><transcript>" + items + "</transcript>"


def ms_to_s(ms):
    return ("%.3f" % (ms / 1000)).rstrip("0").rstrip(".")


def xml_escape(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("'", "&#39;").replace(
        "\"", "&quot;")


# The chapters of the watch-next replies: video -> (lengthSeconds, [(title, start second), ...]).
NEXT_CHAPTERS = {
    "chaptLong01": (1200, [("Opening", 0), ("The problem", 95), ("A first answer", 400), ("Questions \"live\"", 777)]),
    "chaptShort1": (12, [("Hello", 0), ("Caf\u00e9 talk", 2)]),
    "chaptOnce01": (12, [("Hello", 0), ("Caf\u00e9 talk", 2)]),
}


def chapter_time(s):
    return "%d:%02d" % (s // 60, s % 60) if s < 3600 else "%d:%02d:%02d" % (s // 3600, s // 60 % 60, s % 60)


def next_reply(video):
    """A watch-next reply: the chapters panel for a video of NEXT_CHAPTERS, between panels that hold none."""
    def marker(title, start):
        return {"macroMarkersListItemRenderer": {
            "title": {"simpleText": title},
            "timeDescription": {"simpleText": chapter_time(start)},
            "thumbnail": {"thumbnails": [{"url": "https://i.ytimg.com/vi/%s/hqdefault_%d.jpg" % (video, start),
                                          "width": 168, "height": 94}]},
            "onTap": {"commandMetadata": {"webCommandMetadata": {"url": "/watch?v=%s&t=%ds" % (video, start)}},
                      "watchEndpoint": {"videoId": video, "startTimeSeconds": start}}}}
    panels = [{"engagementPanelSectionListRenderer": {
        "panelIdentifier": "engagement-panel-comments-section",
        "content": {"sectionListRenderer": {"contents": []}}}},
        # Key moments: markers of the same shape that are not the chapters.
        {"engagementPanelSectionListRenderer": {
            "content": {"macroMarkersListRenderer": {"contents": [marker("A key moment", 7)]}},
            "panelIdentifier": "engagement-panel-macro-markers-auto-chapters"}}]
    if video in NEXT_CHAPTERS:
        panels.append({"engagementPanelSectionListRenderer": {
            "panelIdentifier": "engagement-panel-macro-markers-description-chapters",
            "content": {"macroMarkersListRenderer": {
                "contents": [marker(t, start) for t, start in NEXT_CHAPTERS[video][1]],
                "syncButtonLabel": {"runs": [{"text": "Sync to video time"}]}}}}})
    panels.append({"engagementPanelSectionListRenderer": {
        "panelIdentifier": "engagement-panel-searchable-transcript",
        "content": {"continuationItemRenderer": {"continuationEndpoint": {"getTranscriptEndpoint": {
            "params": "CgtmYWtl"}}}}}})
    return {"responseContext": {"visitorData": urllib.parse.unquote(VISITOR_DATA)},
            "contents": {"twoColumnWatchNextResults": {"results": {"results": {"contents": []}}}},
            "currentVideoEndpoint": {"watchEndpoint": {"videoId": video}},
            "playerOverlays": {"playerOverlayRenderer": {}},
            "engagementPanels": panels,
            "topbar": {}}


def cues_for(video, lang, kind, tlang=""):
    if tlang:
        lines = TRANSLATED.get(tlang) or ["[%s] %s" % (tlang, cue[2]) for cue in cues_for(video, lang, kind)[:2]]
        return [(120, 2400, lines[0]), (2520, 3000, lines[1])]
    if video == "long1500seg":
        return [(i * 2000, 1900, "line %d" % (i + 1)) for i in range(1500)]
    if video == "chaptLong01":
        return [(i * 2000, 1900, "sentence %d of a talk in chapters" % (i + 1)) for i in range(600)]
    if video == "longHour248":
        return [(i * 1500, 1400, "line %d of an hour-long talk, spoken at an even pace" % (i + 1)) for i in range(1670)]
    if video == "capSrv1xxx1":
        return [(1200, 3400, "It's fish & chips"), (4600, 2000, "<b> is bold")]
    lines = TRACK_TEXT.get((lang, kind), TRACK_TEXT[("en", "")])
    return [(120, 2400, lines[0]), (2520, 3000, lines[1])]


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.reset()

    def reset(self):
        self.requests = {}
        self.clients = {}
        self.player_keys = {}
        self.player_visitor = {}
        self.timedtext = {}
        self.cookies = {}
        self.sent = {}
        self.sources = {}
        self.source_times = {}
        self.blocked = {}
        self.client_ids = {}
        self.contexts = {}
        self.rationed = {}
        self.tlang_throttled = {}
        self.calls = []

    def add(self, table, video, value):
        with self.lock:
            table.setdefault(video, []).append(value)

    def count(self, key):
        with self.lock:
            self.requests[key] = self.requests.get(key, 0) + 1

    def bump(self, table, key):
        with self.lock:
            table[key] = table.get(key, 0) + 1

    def snapshot(self):
        with self.lock:
            return {"requests": dict(self.requests), "clients": dict(self.clients),
                    "player_keys": dict(self.player_keys), "player_visitor": dict(self.player_visitor),
                    "timedtext": dict(self.timedtext), "cookies": dict(self.cookies), "sent": dict(self.sent),
                    "sources": dict(self.sources), "source_times": dict(self.source_times),
                    "blocked": dict(self.blocked),
                    "client_ids": dict(self.client_ids), "contexts": dict(self.contexts),
                    "rationed": dict(self.rationed), "tlang_throttled": dict(self.tlang_throttled),
                    "calls": list(self.calls), "visitors": visitors_issued(),
                    "visitor_times": visitor_times()}


STATS = Stats()

# --block-source addresses and --block-mode.
BLOCK = {"sources": set(), "mode": "429"}

# The platform's ration: --ration-limit, --throttle-tlang (None: no limit), their window, and what each source spent.
RATION_REASON = "This content isn\u2019t available, try again later."
OUTDATED_REASON = "Watch on the latest version of YouTube."
RATION = {"limit": None, "tlang_limit": None, "tlang_mode": "429", "window_s": 3600, "started": time.monotonic(),
          "wrong_videos": set(), "outdated_clients": set()}


class Ration:
    """Requests of each source address in the current window: player and page requests, and tlang requests."""

    def __init__(self):
        self.lock = threading.Lock()
        self.reset()

    def reset(self):
        with self.lock:
            self.window = None
            self.spent = {}

    def spend(self, source, kind, limit):
        """Counts one request of kind from source; True when it is past limit in this window."""
        window = int((time.monotonic() - RATION["started"]) // RATION["window_s"])
        with self.lock:
            if window != self.window:
                self.window, self.spent = window, {}
            key = (source, kind)
            self.spent[key] = self.spent.get(key, 0) + 1
            return limit is not None and self.spent[key] > limit


RATIONS = Ration()
# --delay-ms: every platform request (not the test's /__ requests) takes this long, each in its own thread.
DELAY_S = [0.0]

# Visitor data issued by /youtubei/v1/visitor_id (as issued: padding percent-encoded), in order.
VISITORS = {"issued": [], "times": [], "lock": threading.Lock()}

REEL_PATH = "/youtubei/v1/reel/reel_item_watch"
NEXT_PATH = "/youtubei/v1/next"
VISITOR_PATH = "/youtubei/v1/visitor_id"
INVALID_ARGUMENT = {"error": {"code": 400, "message": "Request contains an invalid argument.",
                              "status": "INVALID_ARGUMENT"}}
UNRECORDED_HEADERS = ("host", "content-length", "accept-encoding", "connection")


def visitors_issued():
    with VISITORS["lock"]:
        return list(VISITORS["issued"])


def visitor_times():
    with VISITORS["lock"]:
        return list(VISITORS["times"])


def issue_visitor():
    """A fresh visitor data value (the shape the platform issues: a protobuf with an 11-character id, base64url with
    its padding percent-encoded)."""
    with VISITORS["lock"]:
        n = len(VISITORS["issued"])
        ident = ("fakeVisit%02d" % (n % 100)).encode()
        # As long as the platform's (580 bytes and more, with a long opaque field), its padding percent-encoded.
        opaque = bytes((i * 37 + n) % 256 for i in range(421))
        raw = (b"\x0a\x0b" + ident + b"\x28" + bytes([0x80 + n % 64, 0x01]) + b"\x32\x04\x0a\x02US" +
               b"\x3a\xa5\x03" + opaque)
        value = base64.urlsafe_b64encode(raw).decode().replace("=", "%3D")
        VISITORS["issued"].append(value)
        VISITORS["times"].append(time.monotonic())
        return value


# Pages read from --captures: name -> text, plus the key and consent value they hold.
CAPTURES = {}


def load_captures(folder):
    def read(name):
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            return f.read()
    CAPTURES["watch"] = read("youtube.html.static")
    CAPTURES["consent"] = read("youtube_consent_page.html.static")
    CAPTURES["consent_bad"] = read("youtube_consent_page_invalid.html.static")
    CAPTURES["recaptcha"] = read("youtube_too_many_requests.html.static")
    CAPTURES["key"] = re.search(r'"INNERTUBE_API_KEY":"([^"]+)"', CAPTURES["watch"]).group(1)
    CAPTURES["v"] = re.search(r'name="v" value="([^"]+)"', CAPTURES["consent"]).group(1)
    CAPTURES["tracklist1"] = json.loads(read("youtube.innertube.json.static"))["captions"][
        "playerCaptionsTracklistRenderer"]
    CAPTURES["android_reply"] = read("youtube.innertube.json.static")
    CAPTURES["tracklist_pot"] = json.loads(read("youtube_po_token_required.innertube.json.static"))["captions"][
        "playerCaptionsTracklistRenderer"]
    refusals = glob.glob(os.path.join(folder, "..", "newpipe", "reel", "*", "*-player-unplayable.visionos.json"))
    if refusals:
        with open(sorted(refusals)[0], encoding="utf-8") as f:
            CAPTURES["visionos_refusal"] = json.loads(json.load(f)["response"]["responseBody"])
    CAPTURES["meta"] = {}
    for video, name in META_CAPTURES.items():
        path = os.path.join(folder, name)
        if os.path.exists(path):
            CAPTURES["meta"][video] = captured_player(path)
    CAPTURES["refusals"] = {}
    for video, (pattern, wrapped) in REFUSAL_CAPTURES.items():
        found = sorted(glob.glob(os.path.join(folder, pattern)))
        if found:
            with open(found[0], encoding="utf-8") as f:
                reply = json.load(f)
            if wrapped:  # a recorded reel exchange: the player reply its reply wraps
                reply = json.loads(reply["response"]["responseBody"])["playerResponse"]
            CAPTURES["refusals"][video] = reply
    newpipe = os.path.join(folder, "..", "newpipe", "audiotracklanguage.player.json")
    if os.path.exists(newpipe):
        with open(newpipe, encoding="utf-8") as f:
            CAPTURES["tracklist2"] = json.load(f)["captions"]["playerCaptionsTracklistRenderer"]


# Browse replies read from the captures: (status, body) by the browseId and by the continuation their request sent;
# LATER holds the continuations a recorded reply gives (the pages after a first one).
BROWSE = {"by_id": {}, "by_token": {}, "later": set(), "missing": None, "bad_channel": None,
          "hold": threading.Event(), "held": threading.Condition()}
BROWSE["hold"].set()  # set: nothing held


# The alert of a private playlist (no capture records one): the recorded "does not exist" reply says this instead.
PRIVATE_PLAYLIST = "This playlist is private."


def load_browse_captures(folder):
    files = sorted(glob.glob(os.path.join(folder, "..", "newpipe", "playlist", "*", "*.json")) +
                   glob.glob(os.path.join(folder, "..", "newpipe", "channel", "*", "*.json")))
    for path in files:
        with open(path, encoding="utf-8") as f:
            exchange = json.load(f)
        request, response = exchange["request"], exchange["response"]
        if "/youtubei/v1/browse" not in request["url"] or "$fields" in request["url"]:
            continue
        sent = json.loads(bytes(b & 0xff for b in request["dataToSend"]).decode("utf-8"))
        reply = (response["responseCode"], response["responseBody"])
        if "continuation" in sent:
            BROWSE["by_token"][sent["continuation"]] = reply
        else:
            BROWSE["by_id"][sent["browseId"]] = reply
        if response["responseCode"] == 400:
            BROWSE["bad_channel"] = reply
        elif "does not exist" in response["responseBody"] and BROWSE["missing"] is None:
            BROWSE["missing"] = reply
    for _status, body in list(BROWSE["by_id"].values()) + list(BROWSE["by_token"].values()):
        for token in BROWSE["by_token"]:
            if token in body:
                BROWSE["later"].add(token)


ENDLESS_PAGE = 10


def endless_page(kind, page):
    """A continuation reply of a list that never ends: page number page of kind "endless" or "sameids"."""
    if kind == "endless":
        ids = ["e%06d%04d" % (page, i) for i in range(ENDLESS_PAGE)]
    else:
        ids = ["s%010d" % i for i in range(ENDLESS_PAGE)]
    items = [{"playlistVideoRenderer": {"videoId": v}} for v in ids]
    items.append({"continuationItemRenderer": {"continuationEndpoint": {
        "continuationCommand": {"token": "%s-page-%d" % (kind, page + 1)}}}})
    return json.dumps({"responseContext": {}, "onResponseReceivedActions": [
        {"appendContinuationItemsAction": {"continuationItems": items}}]})


def first_page_browse_id(token):
    """The "VL…" browse id a client-built first-page token names, or None."""
    try:
        raw = base64.urlsafe_b64decode(urllib.parse.unquote(token) + "==")
    except ValueError:
        return None
    match = re.search(rb"\x12(.)(VL[A-Za-z0-9_-]+)", raw)
    return match.group(2).decode() if match and match.group(1)[0] == len(match.group(2)) else None


# Ids answered with a captured playable reply, whole (its videoId made the id asked, its caption baseUrls this
# server's): a player capture, or the player reply a captured watch page embeds (ytInitialPlayerResponse).
META_CAPTURES = {
    "realMeta001": os.path.join("..", "newpipe", "descriptionunboxing.player.json"),
    "realMeta002": "youtube.html.static",
}


def captured_player(path):
    """The player reply of a capture: the file itself, or the ytInitialPlayerResponse of a captured page."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if not path.endswith(".html.static"):
        return json.loads(text)
    start = text.index("ytInitialPlayerResponse = ") + len("ytInitialPlayerResponse = ")
    return json.JSONDecoder().raw_decode(text[start:])[0]


# Ids answered with a captured refusal, as captured (its videoId made the id asked): the capture's file (a glob
# relative to the --captures folder) and whether it is a recorded reel exchange wrapping the player reply.
REFUSAL_CAPTURES = {
    "realPrivat1": (os.path.join("..", "newpipe", "reel", "*", "*-private.reel.json"), True),
    "realMember1": (os.path.join("..", "newpipe", "reel", "*", "members-only.reel.json"), True),
    "realGeoRes1": (os.path.join("..", "newpipe", "reel", "*", "geo-restricted.reel.json"), True),
    "realAgeRes1": ("youtube_age_restricted.innertube.json.static", False),
    "realUnavai1": ("youtube_video_unavailable.innertube.json.static", False),
}


def captured_refusal(video, reason):
    """The captured VISIONOS refusal with only its reason changed, and its videoId made the id asked."""
    reply = json.loads(json.dumps(CAPTURES["visionos_refusal"]))
    reply["playabilityStatus"]["reason"] = reason
    reply["videoDetails"]["videoId"] = video
    return reply


def captured_tracks(video, tracklist, keep_exp=False):
    """The captured tracks with baseUrls of this server (keep_exp: with the captured baseUrl's exp list, if any), and
    the captured translation languages."""
    tracks = []
    for t in tracklist["captionTracks"]:
        t = dict(t)
        exp = urllib.parse.parse_qs(urllib.parse.urlsplit(t["baseUrl"]).query).get("exp", [""])[0] if keep_exp else ""
        t["baseUrl"] = track_url(video, t["languageCode"], t.get("kind", ""), po_token=bool(exp), exp=exp)
        tracks.append(t)
    return tracks, tracklist["translationLanguages"]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "FakePlatform/1.0"
    sys_version = ""

    def log_message(self, fmt, *args):
        pass

    # Plumbing.

    def send(self, status, body, content_type="application/json; charset=UTF-8", headers=()):
        if isinstance(body, str):
            body = body.encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        for name, value in headers:
            self.send_header(name, value)
        if "gzip" in self.headers.get("Accept-Encoding", "") and content_type.startswith(("text/xml", "application")):
            body = gzip.compress(body)
            self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_json(self, status, obj):
        self.send(status, json.dumps(obj, ensure_ascii=False))

    def redirect(self, location, status=302):
        self.send(status, "", "text/html; charset=UTF-8", [("Location", location)])

    def origin(self):
        return "http://" + self.headers.get("Host", "127.0.0.1")

    def hang(self):
        """Answers nothing until the client goes away (or HANG_MAX_SECONDS)."""
        fakeserver.hang(self, HANG_MAX_SECONDS)

    def send_truncated(self, body):
        body = body.encode("utf-8")
        self.send_response(200)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(body) * 2))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()
        self.close_connection = True

    def send_drip(self, video, body):
        """200 with the whole body announced, then one byte every DRIP_INTERVAL_S until done or the client leaves."""
        body = body.encode("utf-8")
        self.send_response(200)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        sent = 0
        deadline = time.monotonic() + HANG_MAX_SECONDS
        try:
            self.wfile.flush()
            while sent < len(body) and time.monotonic() < deadline:
                self.wfile.write(body[sent:sent + 1])
                self.wfile.flush()
                sent += 1
                time.sleep(DRIP_INTERVAL_S)  # the wait is the test: a platform that drips its reply
        except OSError:
            pass
        STATS.add(STATS.sent, video, sent)
        self.close_connection = True

    def send_reset(self, video, body):
        """200 with the whole body announced, half of it, then a TCP reset (SO_LINGER 0) instead of the rest."""
        body = body.encode("utf-8")
        self.send_response(200)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body[:len(body) // 2])
            self.wfile.flush()
            time.sleep(0.05)  # the wait is the test: the half body goes out before the reset
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            # Closed here, before the server's own shutdown(SHUT_WR) could send a FIN ahead of the reset.
            self.connection.close()
        except OSError:
            pass
        STATS.add(STATS.sent, video, len(body) // 2)
        self.close_connection = True

    def send_large(self, total, chunked, video=None):
        """total bytes of a JSON array, chunked with no length or with Content-Length, until the client leaves;
        with video, the bytes that left are counted in /__stats "sent"."""
        chunk = b"[" + b"0," * 32767 + b"0]"
        self.send_response(200)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(total))
        self.end_headers()
        sent = 0
        try:
            while sent < total:
                part = chunk[:total - sent]
                self.wfile.write(b"%x\r\n" % len(part) + part + b"\r\n" if chunked else part)
                sent += len(part)
            if chunked:
                self.wfile.write(b"0\r\n\r\n")
        except OSError:
            pass
        if video is not None:
            STATS.add(STATS.sent, video, sent)
        self.close_connection = True

    def egress_blocked(self, path):
        """Counts the request by source address; answers it as a block when that address is blocked."""
        source = self.client_address[0]
        STATS.bump(STATS.sources, source)
        STATS.add(STATS.source_times, source, time.monotonic())
        if source not in BLOCK["sources"]:
            return False
        STATS.bump(STATS.blocked, source)
        if BLOCK["mode"] == "recaptcha" and path == "/watch":
            self.send(200, RECAPTCHA_PAGE, "text/html; charset=utf-8")
        else:
            self.send(429, RECAPTCHA_PAGE, "text/html; charset=utf-8")
        return True

    # Routes.

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        video = query.get("v", [""])[0]
        if url.path == "/__stats":
            self.send_json(200, STATS.snapshot())
            return
        STATS.count("GET %s %s" % (url.path, video))
        time.sleep(DELAY_S[0])  # the wait is the test: the platform's latency, set by /__delay
        if self.egress_blocked(url.path):
            return
        if url.path == "/watch":
            # A page request spends the source's ration like a player request; the page itself is still served.
            RATIONS.spend(self.client_address[0], "player", RATION["limit"])
            self.get_watch(video)
        elif url.path == "/api/timedtext":
            self.get_timedtext(video, query)
        elif url.path == "/videoplayback":
            self.get_audio(query)
        else:
            self.send(404, "<html>404</html>", "text/html; charset=UTF-8")

    def do_POST(self):
        url = urllib.parse.urlsplit(self.path)
        length = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(length) if length else b""
        if url.path == "/__renew":
            video = urllib.parse.parse_qs(url.query).get("v", [""])[0]
            CAPTION_GEN[video] = CAPTION_GEN.get(video, 0) + 1
            self.send_json(200, {"gen": CAPTION_GEN[video]})
            return
        if url.path == "/__reset":
            STATS.reset()
            RATIONS.reset()
            self.send_json(200, {"ok": True})
            return
        if url.path == "/__browse_hold":
            BROWSE["hold"].clear()
            self.send_json(200, {"ok": True})
            return
        if url.path == "/__browse_release":
            BROWSE["hold"].set()
            self.send_json(200, {"ok": True})
            return
        time.sleep(DELAY_S[0])  # the wait is the test: the platform's latency, set by /__delay
        if url.path.startswith("/youtubei/v1/"):
            self.record_call(url, raw)
        if url.path == "/youtubei/v1/browse":
            STATS.count("POST /youtubei/v1/browse")
            if not self.egress_blocked(url.path):
                self.post_browse(raw)
            return
        if url.path == VISITOR_PATH:
            self.post_visitor(raw)
            return
        if url.path == NEXT_PATH:
            self.post_next(raw)
            return
        reel = url.path == REEL_PATH
        if url.path != "/youtubei/v1/player" and not reel:
            STATS.count("POST %s" % url.path)
            self.send(404, "<html>404</html>", "text/html; charset=UTF-8")
            return
        try:
            body = json.loads(raw)
            video = body["playerRequest"]["videoId"] if reel else body["videoId"]
            client = body["context"]["client"]
            name, version = client["clientName"], client["clientVersion"]
        except (ValueError, KeyError, TypeError):
            STATS.count("POST %s ?" % url.path)
            self.send_json(400, INVALID_ARGUMENT)
            return
        STATS.count("POST %s %s" % (url.path, video))
        STATS.add(STATS.clients, video, "%s:%s" % (name, version))
        STATS.add(STATS.client_ids, video, self.headers.get("X-YouTube-Client-Name", ""))
        STATS.add(STATS.contexts, video, {"client": client, "user_agent": self.headers.get("User-Agent", ""),
                                          "version_header": self.headers.get("X-YouTube-Client-Version", "")})
        if self.egress_blocked(url.path):
            return
        query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        if "key" in query:
            STATS.add(STATS.player_keys, video, query["key"][0])
            STATS.add(STATS.player_visitor, video, "visitorData" in client)
            if query["key"][0] != (CAPTURES["key"] if video.startswith("real") and CAPTURES else API_KEY):
                self.send_json(400, {"error": {"code": 400, "message": "API key not valid. Please pass a valid "
                                               "API key.", "status": "INVALID_ARGUMENT"}})
                return
        if RATIONS.spend(self.client_address[0], "player", RATION["limit"]):
            STATS.bump(STATS.rationed, self.client_address[0])
            self.send_json(200, captured_refusal(video, RATION_REASON))
            return
        if name in RATION["outdated_clients"]:
            self.send_json(200, captured_refusal(video, OUTDATED_REASON))
            return
        if video in RATION["wrong_videos"]:
            self.send(200, CAPTURES["android_reply"])
            return
        if reel:
            self.post_reel(url, video, name, client)
            return
        self.post_player(video, name)

    def post_browse(self, raw):
        bad = (400, json.dumps({"error": {"code": 400, "message": "Request contains an invalid argument.",
                                          "status": "INVALID_ARGUMENT"}}))
        try:
            sent = json.loads(raw)
        except ValueError:
            sent = {}
        token, browse_id = sent.get("continuation"), sent.get("browseId")
        reply = bad
        endless = re.fullmatch(r"(endless|sameids)-page-([0-9]{1,9})", token or "")
        if endless is not None:
            STATS.count("POST /youtubei/v1/browse endless")
            self.send(200, endless_page(endless.group(1), int(endless.group(2))).encode("utf-8"))
            return
        first = first_page_browse_id(token) if token is not None else browse_id
        if first is not None and re.match(r"VLPL(endless|sameids)", first):
            STATS.count("POST /youtubei/v1/browse endless")
            self.send(200, endless_page(first[4:11], 1).encode("utf-8"))
            return
        if token is not None:
            if token in BROWSE["by_token"]:
                reply = BROWSE["by_token"][token]
                if token in BROWSE["later"] and not BROWSE["hold"].is_set():
                    STATS.count("POST /youtubei/v1/browse held")
                    BROWSE["hold"].wait(60)  # the wait is the test: a page read while the gateway is killed
            else:
                browse_id = first_page_browse_id(token)
                if browse_id is not None:
                    STATS.count("POST /youtubei/v1/browse token read")
        if browse_id is not None:
            if browse_id in BROWSE["by_id"]:
                reply = BROWSE["by_id"][browse_id]
            elif browse_id.startswith("VLPLprivate") and BROWSE["missing"] is not None:
                status, body = BROWSE["missing"]
                reply = (status, body.replace("The playlist does not exist.", PRIVATE_PLAYLIST))
            elif browse_id.startswith("VLPLfail500"):
                reply = (500, json.dumps({"error": {"code": 500, "message": "Internal error encountered.",
                                                    "status": "INTERNAL"}}))
            elif browse_id.startswith("VL") and BROWSE["missing"] is not None:
                reply = BROWSE["missing"]
            elif browse_id.startswith("UC") and BROWSE["bad_channel"] is not None:
                reply = BROWSE["bad_channel"]
        self.send(reply[0], reply[1].encode("utf-8"))

    def record_call(self, url, raw):
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in UNRECORDED_HEADERS}
        with STATS.lock:
            STATS.calls.append({"host": self.headers.get("Host", ""), "path": url.path,
                                "query": urllib.parse.parse_qs(url.query, keep_blank_values=True),
                                "body": body, "headers": headers})

    def post_next(self, raw):
        try:
            video = json.loads(raw)["videoId"]
        except (ValueError, KeyError, TypeError):
            STATS.count("POST %s ?" % NEXT_PATH)
            self.send_json(400, INVALID_ARGUMENT)
            return
        STATS.count("POST %s %s" % (NEXT_PATH, video))
        if self.egress_blocked(NEXT_PATH):
            return
        if video == "chaptFail01":
            self.send_json(500, {"error": {"code": 500, "message": "Internal error encountered.",
                                           "status": "INTERNAL"}})
            return
        self.send_json(200, next_reply(video))

    def post_visitor(self, raw):
        STATS.count("POST %s" % VISITOR_PATH)
        try:
            json.loads(raw)["context"]["client"]["clientName"]
        except (ValueError, KeyError, TypeError):
            self.send_json(400, INVALID_ARGUMENT)
            return
        self.send_json(200, {"responseContext": {"visitorData": issue_visitor(),
                                                 "serviceTrackingParams": [{"service": "GFEEDBACK", "params": []}]}})

    def post_reel(self, url, video, client_name, client):
        """The reel call: its query and visitor data checked, then the player reply of the same id and client, wrapped
        as the platform wraps it, with SABR-only formats."""
        query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        if query.get("id") != [video] or query.get("$fields") != ["playerResponse"]:
            self.send_json(400, INVALID_ARGUMENT)
            return
        # The maintained clients send the issued value unchanged, in the body and in X-Goog-Visitor-Id alike.
        visitor = client.get("visitorData", "") or ""
        with VISITORS["lock"]:
            trusted = visitor in VISITORS["issued"] and self.headers.get("X-Goog-Visitor-Id") == visitor
        if not trusted:
            self.send_json(200, {"playerResponse": player_error("UNPLAYABLE", "This video is not available")})
            return
        if video == "reelNone001":
            self.send_json(200, {})
            return
        sent = []
        self.send_json = lambda status, obj: sent.append((status, obj))
        try:
            self.post_player(video, client_name)
        finally:
            del self.send_json
        if not sent:
            return  # the player scenario answered by itself (a hang, a 429 page...)
        status, reply = sent[0]
        if status == 200 and isinstance(reply, dict) and "playabilityStatus" in reply:
            streaming = reply.get("streamingData")
            if streaming is not None:
                for f in streaming.get("adaptiveFormats", []):
                    f.pop("url", None)
                streaming["serverAbrStreamingUrl"] = self.origin() + "/videoplayback?sabr=1&id=o-Fake" + video
            reply = {"playerResponse": reply}
        self.send_json(status, reply)

    def get_watch(self, video):
        cookie = self.headers.get("Cookie", "")
        STATS.add(STATS.cookies, video, cookie)
        if video.startswith("real") and CAPTURES:
            consent_done = ("CONSENT=YES+" + CAPTURES["v"]) in cookie
            page = {"realWatch01": "watch", "realConsent": "watch" if consent_done else "consent",
                    "realConsBad": "consent_bad", "realRecapt1": "recaptcha"}.get(video, "watch")
            self.send(200, CAPTURES[page], "text/html; charset=utf-8")
        elif video == "consentOk01" and ("CONSENT=YES+" + CONSENT_V) not in cookie:
            self.send(200, consent_page(True), "text/html; charset=utf-8")
        elif video == "consentBad1":
            self.send(200, consent_page(False), "text/html; charset=utf-8")
        elif video == "recaptcha01":
            self.send(200, RECAPTCHA_PAGE, "text/html; charset=utf-8")
        elif video == "http429xxx1":
            self.send(429, RECAPTCHA_PAGE, "text/html; charset=utf-8")
        else:
            self.send(200, watch_page(video), "text/html; charset=utf-8")

    def post_player(self, video, client_name):
        origin = self.origin()
        one_en = [caption_track(video, "en", "English")]
        if video in ("capJson3xx1", "consentOk01", "capSrv1xxx1", "slowPlayer1", "truncated01", "oversizeCap",
                     "long1500seg", "longHour248", "chaptLong01", "chaptShort1", "chaptOnce01", "chaptFail01", "redirOkxxx1", "realWatch01",
                     "realConsent",
                     "realConsBad", "realRecapt1"):
            if video == "slowPlayer1":
                time.sleep(SLOW_SECONDS)  # the wait is the test: a slow platform
            self.send_json(200, player_ok(origin, video, one_en))
        elif video == "capSrv3xxx1":
            self.send_json(200, player_ok(origin, video, [caption_track(video, "en", "English (auto-generated)",
                                                                        "asr")]))
        elif video == "multiLang01" or video.startswith(("mlang", "stale")):
            tracks = [caption_track(video, "en", "English"),
                      caption_track(video, "en", "English (auto-generated)", "asr"),
                      caption_track(video, "pt-BR", "Portuguese (Brazil)"),
                      caption_track(video, "de", "German")]
            self.send_json(200, player_ok(origin, video, tracks, default_index=3))
        elif video.startswith(("twinM", "twinA")):
            # Twin tracks: a manual and an auto-generated track of one language (the common case), and one more
            # language; the default is the manual twin ("twinM...") or the auto-generated one ("twinA...").
            tracks = [caption_track(video, "en", "English"),
                      caption_track(video, "en", "English (auto-generated)", "asr"),
                      caption_track(video, "es", "Spanish")]
            self.send_json(200, player_ok(origin, video, tracks, default_index=0 if video.startswith("twinM") else 1))
        elif video == "fourLangs01":
            tracks = [caption_track(video, "en", "English"), caption_track(video, "es", "Spanish"),
                      caption_track(video, "ja", "Japanese"), caption_track(video, "pt-BR", "Portuguese (Brazil)")]
            self.send_json(200, player_ok(origin, video, tracks))
        elif video == "noTranslat1":
            self.send_json(200, player_ok(origin, video, [caption_track(video, "en", "English", translatable=False)]))
        elif video in ("realTracks1", "realTracks2") and CAPTURES.get("tracklist" + video[-1]):
            tracks, translations = captured_tracks(video, CAPTURES["tracklist" + video[-1]])
            self.send_json(200, player_ok(origin, video, tracks, translations=translations))
        elif video == "realPoTokn1" and CAPTURES.get("tracklist_pot"):
            tracks, translations = captured_tracks(video, CAPTURES["tracklist_pot"], keep_exp=True)
            self.send_json(200, player_ok(origin, video, tracks, translations=translations))
        elif video == "visionUnpl1" or video.startswith("vunpl"):
            if client_name == "VISIONOS":
                self.send_json(200, player_error("UNPLAYABLE", "This video is not available on this app",
                                                 "Made for kids"))
            else:
                self.send_json(200, player_ok(origin, video, [caption_track(video, "en", "English",
                                                                            client=client_name)]))
        elif video in ("visionXpv01", "emptyCap001", "cap403First"):
            xpv = video == "visionXpv01" and client_name == "VISIONOS"
            self.send_json(200, player_ok(origin, video, [caption_track(video, "en", "English", po_token=xpv,
                                                                        client=client_name, exp="xpv")]))
        elif video == "clientRefus":
            if client_name == "VISIONOS":
                self.send_json(403, {"error": {"code": 403, "message": "The caller does not have permission",
                                               "status": "PERMISSION_DENIED"}})
            else:
                self.send_json(200, player_ok(origin, video, one_en))
        elif video == "consentBad1":
            self.send_json(403, {"error": {"code": 403, "status": "PERMISSION_DENIED"}})
        elif video in ("recaptcha01", "http429xxx1"):
            self.send(429, RECAPTCHA_PAGE, "text/html; charset=utf-8")
        elif video == "http500xxx1":
            self.send_json(500, {"error": {"code": 500, "message": "Internal error encountered.",
                                           "status": "INTERNAL"}})
        elif video == "botCheck001":
            self.send_json(200, player_error("LOGIN_REQUIRED", "Sign in to confirm you\u2019re not a bot",
                                             "This helps protect our community. Learn more"))
        elif video == "ageRestr001":
            self.send_json(200, player_error("LOGIN_REQUIRED", "This video may be inappropriate for some users."))
        elif video == "unplayable1":
            self.send_json(200, player_error("UNPLAYABLE", "Video unavailable",
                                             "The uploader has not made this video available in your country"))
        elif video == "liveOffline":
            self.send_json(200, player_error("LIVE_STREAM_OFFLINE", "This live event will begin in a few moments."))
        elif video in META_CAPTURES and video in CAPTURES.get("meta", {}):
            reply = json.loads(json.dumps(CAPTURES["meta"][video]))
            reply["videoDetails"]["videoId"] = video
            renderer = reply.get("captions", {}).get("playerCaptionsTracklistRenderer", {})
            for t in renderer.get("captionTracks", []):
                t["baseUrl"] = track_url(video, t["languageCode"], t.get("kind", ""))
            self.send_json(200, reply)
        elif video in REFUSAL_CAPTURES and video in CAPTURES.get("refusals", {}):
            reply = json.loads(json.dumps(CAPTURES["refusals"][video]))
            if "videoDetails" in reply:
                reply["videoDetails"]["videoId"] = video
            self.send_json(200, reply)
        elif video in ("noCaptions1", "speechLong1", "audio403xx1"):
            self.send_json(200, player_ok(origin, video))
        elif video == "noAudio0001":
            reply = player_ok(origin, video)
            reply["streamingData"]["adaptiveFormats"] = [
                f for f in reply["streamingData"]["adaptiveFormats"] if not f["mimeType"].startswith("audio/")]
            self.send_json(200, reply)
        elif video.startswith("bench"):
            self.send_json(200, player_ok(origin, video, one_en))
        elif video.startswith(("slow", "lazy")):
            time.sleep(SLOW_SECONDS if video.startswith("slow") else LAZY_SECONDS)  # the wait is the test: a slow platform
            self.send_json(200, player_ok(origin, video, one_en))
        elif video == "poToken0001":
            tracks = [caption_track(video, "en", "English", po_token=True),
                      caption_track(video, "en", "English (auto-generated)", "asr", po_token=True)]
            self.send_json(200, player_ok(origin, video, tracks))
        elif video == "potMixed001":
            tracks = [caption_track(video, "en", "English", po_token=True, exp="xpo,xpe"),
                      caption_track(video, "de", "German")]
            self.send_json(200, player_ok(origin, video, tracks))
        elif video == "potLangs001":
            tracks = [caption_track(video, "en", "English", po_token=True),
                      caption_track(video, "de", "German", po_token=True, exp="xpo,xpv"),
                      caption_track(video, "es", "Spanish", po_token=True)]
            self.send_json(200, player_ok(origin, video, tracks))
        elif video == "hangPlayer1":
            self.hang()
        elif video == "dripPlayer1":
            self.send_drip(video, json.dumps(player_ok(origin, video, one_en)))
        elif video == "resetPlayer":
            self.send_reset(video, json.dumps(player_ok(origin, video, one_en)))
        elif video in ("huge100mb01", "huge100mbCL"):
            self.send_large(HUGE_BYTES, chunked=video == "huge100mb01", video=video)
        elif video == "oversizePl1":
            self.send_large(OVERSIZE_BYTES, chunked=False)
        elif video == "malformed01":
            self.send(200, "{\"responseContext\":{},\"playabilityStatus\":{\"status\":\"OK\",}")
        elif video == "redirEvil01":
            self.redirect("https://evil.example.com/youtubei/v1/player")
        elif video == "redirLoop01":
            self.redirect(PLATFORM + "/youtubei/v1/player?prettyPrint=false&loop=1", 307)
        else:
            self.send_json(200, player_error("ERROR", "This video is unavailable"))

    def get_audio(self, query):
        video = query.get("id", [""])[0].replace("o-Fake", "", 1)
        STATS.count("GET /videoplayback %s" % video)
        itag = int(query.get("itag", ["0"])[0] or 0)
        data = AUDIO.get(itag)
        if video == "audio403xx1" or data is None:
            self.send(403 if video == "audio403xx1" else 404, "", "text/plain")
            return
        start, end = 0, len(data) - 1
        m = re.match(r"bytes=(\d+)-(\d*)$", self.headers.get("Range", ""))
        status = 200
        if m:
            start = int(m.group(1))
            end = min(int(m.group(2)) if m.group(2) else len(data) - 1, len(data) - 1)
            status = 206
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", "bytes */%d" % len(data))
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
        chunk = data[start:end + 1]
        self.send_response(status)
        self.send_header("Content-Type", "audio/mp4" if itag == 140 else "audio/webm")
        self.send_header("Content-Length", str(len(chunk)))
        if status == 206:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end, len(data)))
        self.end_headers()
        try:
            self.wfile.write(chunk)
        except OSError:
            pass

    def get_timedtext(self, video, query):
        STATS.add(STATS.timedtext, video, query)
        if query.get("tlang", [""])[0] and RATIONS.spend(self.client_address[0], "tlang", RATION["tlang_limit"]):
            STATS.bump(STATS.tlang_throttled, self.client_address[0])
            if RATION["tlang_mode"] == "empty":
                self.send(200, "", "text/plain; charset=UTF-8")
            else:
                self.send(429, RECAPTCHA_PAGE, "text/html; charset=utf-8")
            return
        if video.startswith("stale") and query.get("gen", [""])[0] != str(CAPTION_GEN.get(video, 0)):
            self.send(404, "", "text/html; charset=UTF-8")
            return
        if video == "redirOkxxx1" and "moved" not in query:
            self.redirect(PLATFORM + "/api/timedtext?moved=1&" + urllib.parse.urlencode(query, doseq=True))
            return
        lang = query.get("lang", ["en"])[0]
        kind = query.get("kind", [""])[0]
        cues = cues_for(video, lang, kind, query.get("tlang", [""])[0])
        client = query.get("c", [""])[0]
        wants_token = {"xpe", "xpv"} & set(query.get("exp", [""])[0].split(","))
        if wants_token and not fake_pot_provider.token_valid(query.get("pot", [""])[0], video):
            self.send(200, "", "text/plain; charset=UTF-8")
        elif video == "emptyCap001" and client == "VISIONOS":
            self.send(200, "", "text/plain; charset=UTF-8")
        elif video == "cap403First" and client == "VISIONOS":
            self.send(403, "<html>403</html>", "text/html; charset=UTF-8")
        elif video == "truncated01":
            self.send_truncated(json3_body(cues))
        elif video == "oversizeCap":
            self.send_large(OVERSIZE_BYTES, chunked=True)
        elif video == "capSrv3xxx1":
            self.send(200, srv3_body(cues), "text/xml; charset=UTF-8")
        elif video == "capSrv1xxx1":
            self.send(200, srv1_body(cues), "text/xml; charset=UTF-8")
        elif query.get("fmt", [""])[0] == "json3":
            self.send(200, json3_body(cues))
        elif query.get("fmt", [""])[0] == "srv3":
            self.send(200, srv3_body(cues), "text/xml; charset=UTF-8")
        else:
            self.send(200, srv1_body(cues), "text/xml; charset=UTF-8")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--captures", help="folder of real captured pages (see the table above)")
    parser.add_argument("--audio-m4a", help="m4a (AAC) file served for itag 140")
    parser.add_argument("--audio-webm", help="webm (Opus) file served for itags 249 and 251")
    parser.add_argument("--audio-duration-ms", type=int, default=12480, help="duration the player reply declares")
    parser.add_argument("--block-source", action="append", default=[], help="a source address to answer as blocked")
    parser.add_argument("--block-mode", choices=("429", "recaptcha"), default="429")
    parser.add_argument("--delay-ms", type=int, default=0, help="time every platform request takes (benchmarks)")
    parser.add_argument("--ration-limit", type=int, help="player and page requests a source gets per window")
    parser.add_argument("--ration-window-s", type=float, default=3600, help="the window of the ration")
    parser.add_argument("--throttle-tlang", type=int, help="tlang requests a source gets per window")
    parser.add_argument("--tlang-throttle-mode", choices=("429", "empty"), default="429")
    parser.add_argument("--wrong-video", action="append", default=[], help="a video answered with another's reply")
    parser.add_argument("--outdated-client", action="append", default=[], help="a client answered as retired")
    args = parser.parse_args()
    RATION.update({"limit": args.ration_limit, "tlang_limit": args.throttle_tlang,
                   "tlang_mode": args.tlang_throttle_mode, "window_s": args.ration_window_s,
                   "wrong_videos": set(args.wrong_video), "outdated_clients": set(args.outdated_client)})
    needs_captures = args.ration_limit is not None or args.wrong_video or args.outdated_client
    DELAY_S[0] = args.delay_ms / 1000.0
    BLOCK["sources"] = set(args.block_source)
    BLOCK["mode"] = args.block_mode
    AUDIO_DURATION_MS[0] = args.audio_duration_ms
    if args.audio_m4a:
        with open(args.audio_m4a, "rb") as f:
            AUDIO[140] = f.read()
    if args.audio_webm:
        with open(args.audio_webm, "rb") as f:
            AUDIO[249] = AUDIO[251] = f.read()
    if args.captures:
        load_captures(args.captures)
        load_browse_captures(args.captures)
    if needs_captures and "visionos_refusal" not in CAPTURES:
        parser.error("--ration-limit, --wrong-video and --outdated-client answer captured replies: give --captures")
    return fakeserver.serve(args.host, args.port, Handler)


if __name__ == "__main__":
    sys.exit(main())
