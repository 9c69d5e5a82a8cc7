#!/usr/bin/env python3
"""POST /mcp beside the REST request it stands for, on one keep-alive connection each, every answer a cache hit:
  - latency of GET /v1/video/transcript (JSON, the whole transcript), of get_transcript's first page and of a page
    asked with its next_cursor (both at the default max_chars), N times each: p50 and p99 in ms;
  - how many pages get_transcript makes of the video at its defaults (format text and segments), and how many chunks
    format=chunks makes at its defaults.
    mcp_pages.py GATEWAY_PORT API_KEY [VIDEO_ID] [N]
"""
import http.client
import json
import sys

from benchhttp import timed


def tool_call(args, n=1):
    return json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                       "params": {"name": "get_transcript", "arguments": args}})


def pct(samples, p):
    s = sorted(samples)
    return s[min(len(s) - 1, int(len(s) * p))] * 1000


def main():
    port, key = int(sys.argv[1]), sys.argv[2]
    video = sys.argv[3] if len(sys.argv) > 3 else "longHour248"
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 500
    rest_h = {"x-api-key": key}
    mcp_h = {"Authorization": "Bearer " + key, "Content-Type": "application/json",
             "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    _, status, body = timed(conn, "GET", "/v1/video/transcript?video_id=" + video, headers=rest_h)
    assert status == 200, (status, body[:200])
    transcript = json.loads(body)
    _, status, body = timed(conn, "POST", "/mcp", tool_call({"video": video}), mcp_h)
    first = json.loads(body)["result"]["structuredContent"]
    cursor = first["next_cursor"]
    runs = {"REST GET transcript (whole, JSON)": ("GET", "/v1/video/transcript?video_id=" + video, None, rest_h),
            "MCP get_transcript, first page": ("POST", "/mcp", tool_call({"video": video}), mcp_h),
            "MCP get_transcript, cursor page": ("POST", "/mcp", tool_call({"video": video, "cursor": cursor}), mcp_h)}
    print("video %s: %d segments, REST body %d B, %d requests each" % (video, len(transcript["segments"]),
                                                                      len(json.dumps(transcript)), n))
    print("| request | p50 ms | p99 ms | bytes |")
    print("|---|---|---|---|")
    for name, (method, path, body, headers) in runs.items():
        samples, size = [], 0
        for _ in range(n):
            dt, status, data = timed(conn, method, path, body, headers)
            assert status == 200, (name, status, data[:200])
            samples.append(dt)
            size = len(data)
        print("| %s | %.3f | %.3f | %d |" % (name, pct(samples, 0.5), pct(samples, 0.99), size))
    for fmt in ("text", "segments"):
        pages, cursor = 0, None
        while True:
            args = {"video": video, "format": fmt}
            if cursor:
                args["cursor"] = cursor
            _, status, data = timed(conn, "POST", "/mcp", tool_call(args), mcp_h)
            sc = json.loads(data)["result"]["structuredContent"]
            pages += 1
            cursor = sc["next_cursor"]
            if cursor is None:
                break
        print("get_transcript pages at the defaults (max_chars 20000), format %s: %d" % (fmt, pages))
    _, status, data = timed(conn, "GET", "/v1/video/transcript?format=chunks&video_id=" + video, headers=rest_h)
    chunks = json.loads(data)["chunks"]
    print("format=chunks at the defaults (chunk_chars 2000, chunk_overlap 200): %d chunks" % len(chunks))


if __name__ == "__main__":
    main()
