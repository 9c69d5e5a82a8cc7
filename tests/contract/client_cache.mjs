// A real HTTP client cache in front of the gateway: undici's cache interceptor (RFC 9111, as a private cache, since
// transcripts are Cache-Control: private). Usage: node client_cache.mjs <base url> <api key> <path> <accept>...
// Sends one GET of <path> per Accept value, in order, through one cache, and prints one JSON line per request:
// {"accept", "status", "contentType", "vary", "requestId", "body"}. A request answered from the cache repeats the
// X-Request-Id of the answer it stored, so the caller sees which requests reached the gateway.
import { Agent, interceptors, request } from "undici";

const [base, key, path, ...accepts] = process.argv.slice(2);
if (!base || !key || !path || accepts.length === 0) {
  console.error("usage: node client_cache.mjs <base url> <api key> <path> <accept>...");
  process.exit(2);
}

const dispatcher = new Agent().compose(interceptors.cache({ type: "private" }));
try {
  for (const accept of accepts) {
    const res = await request(base + path, { dispatcher, headers: { accept, "x-api-key": key } });
    const body = await res.body.text();
    console.log(
      JSON.stringify({
        accept,
        status: res.statusCode,
        contentType: res.headers["content-type"] ?? null,
        vary: res.headers["vary"] ?? null,
        requestId: res.headers["x-request-id"] ?? null,
        body,
      }),
    );
  }
} finally {
  await dispatcher.close();
}
