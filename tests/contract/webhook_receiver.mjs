// A webhook receiver for the integration tests, verifying with the Standard Webhooks reference verifier (npm
// standardwebhooks) as a client of the service would:
//   node webhook_receiver.mjs HOST PLAN
// listens on HOST (a 127.0.0.0/8 address) on a free port, prints "listening PORT" once, and answers the deliveries
// to any path but /_log in the order of PLAN, a comma-separated list whose last entry repeats: a status ("500", "204"),
// "302=URL" (a redirect to URL), "hang" (no answer at all) or "200big" (a 200 with a 1 MiB body).
// GET /_log?secret=S answers what it saw: {"connections": n (besides those of /_log), "deliveries": [{"at_ms",
// "method", "path", "headers" (the webhook-* ones and content-type), "body", "status" (what it answered, 0 for none),
// "verified" (the verifier accepted it with secret S), "error" (the verifier's message when not)}]}.
import http from "node:http";
import { Webhook } from "standardwebhooks";

const [host, planText] = process.argv.slice(2);
if (!host || !planText) {
  console.error("usage: webhook_receiver.mjs HOST PLAN");
  process.exit(2);
}
const plan = planText.split(",");
const deliveries = [];
let connections = 0;
const control = new Set(); // the connections of /_log requests, which are not deliveries' connections

function verify(secret, d) {
  try {
    new Webhook(secret).verify(d.body, d.headers);
    return { verified: true, error: null };
  } catch (e) {
    return { verified: false, error: e.message };
  }
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const url = new URL(req.url, "http://receiver");
    if (req.method === "GET" && url.pathname === "/_log") {
      control.add(req.socket);
      const secret = url.searchParams.get("secret");
      const seen = deliveries.map((d) => ({ ...d, ...(secret ? verify(secret, d) : { verified: null, error: null }) }));
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ connections: connections - control.size, deliveries: seen }));
      return;
    }
    const step = plan[Math.min(deliveries.length, plan.length - 1)];
    const big = step === "200big";
    const [status, location] = big ? ["200", undefined] : step === "hang" ? ["0", undefined] : step.split("=");
    const headers = {};
    for (const name of ["content-type", "webhook-id", "webhook-timestamp", "webhook-signature"])
      if (req.headers[name] !== undefined) headers[name] = req.headers[name];
    deliveries.push({ at_ms: Date.now(), method: req.method, path: url.pathname, headers,
                      body: Buffer.concat(chunks).toString("utf8"), status: Number(status) });
    if (step === "hang") return; // no answer: the request stays open until the sender gives up
    res.writeHead(Number(status), location ? { location } : {});
    res.end(big ? Buffer.alloc(1024 * 1024, "x") : location ? "" : "ok");
  });
});
server.on("connection", () => connections++);
server.listen(0, host, () => console.log(`listening ${server.address().port}`));
process.on("SIGTERM", () => process.exit(0));
