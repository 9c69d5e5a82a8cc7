// A real HTTP client cache in front of the gateway: a private cache whose every decision (what may be stored, which
// stored answer a request may get, Vary included) is http-cache-semantics' RFC 9111 policy, the one npm's own fetch
// cache and got's cacheable-request use; Node's own http client underneath, so it runs on Debian 12's Node 18.
// Usage: node client_cache.mjs <base url> <api key> <path> <accept>...
// Sends one GET of <path> per Accept value, in order, through one cache, and prints one JSON line per request:
// {"accept", "status", "contentType", "vary", "requestId", "body"}. A request answered from the cache repeats the
// X-Request-Id of the answer it stored, so the caller sees which requests reached the gateway.
import http from "node:http";
import CachePolicy from "http-cache-semantics";

const [base, key, path, ...accepts] = process.argv.slice(2);
if (!base || !key || !path || accepts.length === 0) {
  console.error("usage: node client_cache.mjs <base url> <api key> <path> <accept>...");
  process.exit(2);
}

const url = new URL(path, base);
const agent = new http.Agent({ keepAlive: true });
// url -> the answers stored for it, newest first: [{policy, status, body}].
const stored = new Map();

function get(headers) {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { agent, headers }, (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on("error", reject);
    });
    req.on("error", reject);
  });
}

try {
  for (const accept of accepts) {
    const headers = { accept, "x-api-key": key, host: url.host };
    const request = { url: url.pathname + url.search, method: "GET", headers };
    const variants = stored.get(request.url) ?? [];
    const hit = variants.find((v) => v.policy.satisfiesWithoutRevalidation(request));
    let status, resHeaders, body;
    if (hit) {
      ({ status, body } = hit);
      resHeaders = hit.policy.responseHeaders();
    } else {
      const res = await get(headers);
      ({ status, body } = res);
      resHeaders = res.headers;
      const policy = new CachePolicy(request, { status, headers: res.headers }, { shared: false });
      if (policy.storable()) stored.set(request.url, [{ policy, status, body }, ...variants]);
    }
    console.log(
      JSON.stringify({
        accept,
        status,
        contentType: resHeaders["content-type"] ?? null,
        vary: resHeaders["vary"] ?? null,
        requestId: resHeaders["x-request-id"] ?? null,
        body: body.toString("utf8"),
      }),
    );
  }
} finally {
  agent.destroy();
}
