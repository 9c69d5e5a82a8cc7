#!/usr/bin/env python3
"""The share of the shared fixtures' caption tracks each built-in client profile can fetch without a PO token.

    python3 tests/tools/po_token_share.py [FIXTURES_DIR]     (default: ../shared/fixtures from the repository root)

Every player reply among the fixtures is read at run time (nothing of them is kept here): raw replies, the recorded
request/response pairs of the newpipe folders (a reel reply's player reply is its playerResponse), and the player
reply a watch page embeds (ytInitialPlayerResponse, made by the WEB client). The client that made a reply is, in
order: the clientName of the recorded request (the reel path makes it ANDROID_REEL), the "c" parameter of the reply's
serviceTrackingParams, or the client the fixtures' README names for that file. A caption track needs a PO token when
the exp parameter of its baseUrl names xpe or xpv (alone or in a list), as the fetcher reads it (player.c).
Prints one line per built-in profile: tracks without a token need / tracks, and the files counted.
"""

import glob
import json
import os
import re
import sys
import urllib.parse

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILTINS = ["VISIONOS", "ANDROID", "ANDROID_REEL", "IOS", "WEB", "WEB_EMBEDDED"]
# clientName sent by a built-in profile, when it is not the profile's name.
CLIENT_NAMES = {"WEB_EMBEDDED_PLAYER": "WEB_EMBEDDED"}


def readme_clients(folder):
    """file path -> client name, from the rows of the fixtures' README tables that say "<CLIENT> player reply"."""
    out = {}
    try:
        text = open(os.path.join(folder, "README.md"), encoding="utf-8").read()
    except OSError:
        return out
    for m in re.finditer(r"^\|\s*([^|\s]+)\s*\|.*?\|\s*([A-Z_]+) player reply", text, re.M):
        out[m.group(1)] = m.group(2)
    return out


def needs_token(url):
    for value in urllib.parse.parse_qs(urllib.parse.urlsplit(url).query).get("exp", []):
        if {"xpe", "xpv"} & set(value.split(",")):
            return True
    return False


def embedded_reply(html):
    """The player reply a watch page embeds, marked as the WEB client's, or None."""
    m = re.search(r"ytInitialPlayerResponse\s*=\s*", html)
    if not m:
        return None
    try:
        reply, _ = json.JSONDecoder().raw_decode(html, m.end())
    except ValueError:
        return None
    if not isinstance(reply, dict):
        return None
    reply.setdefault("responseContext", {}).setdefault("serviceTrackingParams", []).append(
        {"service": "page", "params": [{"key": "c", "value": "WEB"}]})
    return reply


def player_reply(doc, rel, named):
    """(client, player reply) of a fixture document, or None when it holds no player reply."""
    if "request" in doc and "response" in doc:
        req = doc["request"]
        path = urllib.parse.urlsplit(req.get("url", "")).path
        try:
            body = json.loads(bytes(b & 0xFF for b in req.get("dataToSend") or []).decode("utf-8"))
            reply = json.loads(doc["response"]["responseBody"])
        except (ValueError, KeyError, TypeError):
            return None
        client = body.get("context", {}).get("client", {}).get("clientName")
        if path.endswith("/reel/reel_item_watch"):
            return "ANDROID_REEL", reply.get("playerResponse", {})
        if path.endswith("/player"):
            return CLIENT_NAMES.get(client, client), reply
        return None
    if "playabilityStatus" not in doc:
        return None
    params = {p.get("key"): p.get("value") for s in doc.get("responseContext", {}).get("serviceTrackingParams", [])
              for p in s.get("params", [])}
    client = params.get("c") or named.get(rel)
    return CLIENT_NAMES.get(client, client), doc


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "..", "shared", "fixtures")
    named = readme_clients(folder)
    counts = {name: [0, 0, 0] for name in BUILTINS}  # tracks without a token need, tracks, files
    for path in sorted(glob.glob(os.path.join(folder, "**", "*"), recursive=True)):
        if os.path.isdir(path):
            continue
        try:
            text = open(path, encoding="utf-8").read()
        except (UnicodeDecodeError, OSError):
            continue
        try:
            doc = json.loads(text)
        except ValueError:
            doc = embedded_reply(text)
        if not isinstance(doc, dict):
            continue
        found = player_reply(doc, os.path.relpath(path, folder), named)
        if found is None or found[0] not in counts:
            continue
        client, reply = found
        tracks = reply.get("captions", {}).get("playerCaptionsTracklistRenderer", {}).get("captionTracks", [])
        if not tracks:
            continue
        c = counts[client]
        c[0] += sum(1 for t in tracks if not needs_token(t.get("baseUrl", "")))
        c[1] += len(tracks)
        c[2] += 1
    for name in BUILTINS:
        free, total, files = counts[name]
        share = "%5.1f%%" % (100.0 * free / total) if total else "  n/a "
        print("%-13s %s  %d of %d tracks without a PO token, in %d player replies" % (name, share, free, total, files))
    return 0


if __name__ == "__main__":
    sys.exit(main())
