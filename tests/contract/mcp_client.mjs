// The official MCP TypeScript SDK as a client of vts's POST /mcp, for the integration tests.
//   node mcp_client.mjs URL < plan.json
// plan: {"version": "2025-06-18" (the revision initialize asks for; the SDK's newest when absent),
//        "headers": {...} (sent with every request: the key),
//        "steps": [{"op": "listTools"} | {"op": "ping"} | {"op": "call", "name": N, "args": {...}} |
//                  {"op": "pages", "args": {...}} (get_transcript from the first page to the one whose next_cursor
//                  is null)]}
// Prints one JSON object: {"protocolVersion" (what the transport sends after initialize), "server" (serverInfo),
// "sentVersions" (the MCP-Protocol-Version header of each request after initialize), "statuses" (the HTTP status of
// each request), "steps" (per step: its result, or {"error": {"code", "message"}} when the SDK threw)}.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const url = process.argv[2];
const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const plan = JSON.parse(Buffer.concat(chunks).toString("utf8"));
const sentVersions = [];
const statuses = [];

// Rewrites initialize's protocolVersion to the plan's revision (the SDK always asks for its newest), and records
// what each request carried and got.
async function recordingFetch(input, init) {
  let body = init?.body;
  if (typeof body === "string" && plan.version) {
    const msg = JSON.parse(body);
    if (msg.method === "initialize") {
      msg.params.protocolVersion = plan.version;
      body = JSON.stringify(msg);
    }
  }
  const headers = new Headers(init?.headers);
  if (init?.method === "POST") {
    const msg = typeof body === "string" ? JSON.parse(body) : {};
    if (msg.method !== "initialize") sentVersions.push(headers.get("mcp-protocol-version"));
  }
  const res = await fetch(input, { ...init, body });
  statuses.push([init?.method ?? "GET", res.status]);
  return res;
}

const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: plan.headers ?? {} },
  fetch: recordingFetch,
});
const client = new Client({ name: "vts-tests", version: "1.0.0" });
const out = { steps: [] };
async function step(s) {
  switch (s.op) {
    case "listTools":
      return await client.listTools();
    case "ping":
      return await client.ping();
    case "call":
      return await client.callTool({ name: s.name, arguments: s.args });
    case "pages": {
      const pages = [];
      let cursor;
      do {
        const args = { ...s.args };
        if (cursor !== undefined) args.cursor = cursor;
        const r = await client.callTool({ name: "get_transcript", arguments: args });
        if (r.isError) return { pages, error: r };
        pages.push(r.structuredContent);
        cursor = r.structuredContent.next_cursor ?? undefined;
      } while (cursor !== undefined);
      return { pages };
    }
    default:
      throw new Error("unknown op " + s.op);
  }
}
try {
  await client.connect(transport);
  out.protocolVersion = transport.protocolVersion;
  out.server = client.getServerVersion();
  for (const s of plan.steps ?? []) {
    try {
      out.steps.push(await step(s));
    } catch (e) {
      out.steps.push({ error: { code: e.code ?? null, message: String(e.message) } });
    }
  }
} catch (e) {
  out.connectError = { code: e.code ?? null, message: String(e.message) };
}
out.sentVersions = sentVersions;
out.statuses = statuses;
await client.close();
process.stdout.write(JSON.stringify(out) + "\n");
