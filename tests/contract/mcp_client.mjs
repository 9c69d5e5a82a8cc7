// The official MCP TypeScript SDK as a client of vts's POST /mcp, for the integration tests.
//   node mcp_client.mjs URL < plan.json
// plan: {"version": "2025-06-18" (the revision initialize asks for; the SDK's newest when absent),
//        "headers": {...} (sent with every request: the key),
//        "steps": [{"op": "listTools"} | {"op": "ping"} | {"op": "call", "name": N, "args": {...}} |
//                  {"op": "pages", "args": {...}} (get_transcript from the first page to the one whose next_cursor
//                  is null) |
//                  {"op": "job", "args": {...}, "max_chars": N} (start_transcript_job, then get_transcript_job polled
//                  until the job is done or cancelled, then its items paged from the first page to the last)]}
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
    case "job": {
      const start = await client.callTool({ name: "start_transcript_job", arguments: s.args });
      if (start.isError) return { start };
      const jobId = start.structuredContent.id;
      const deadline = Date.now() + 60000;
      let status;
      do {
        status = await client.callTool({ name: "get_transcript_job", arguments: { job_id: jobId, max_chars: 1000 } });
        if (status.isError) return { start, status };
        const st = status.structuredContent.job.status;
        if (st === "done" || st === "cancelled") break;
        // poll interval: the job's items are fetched in the background; a tenth of a second between looks.
        await new Promise((resolve) => setTimeout(resolve, 100));
      } while (Date.now() < deadline);
      const pages = [];
      let cursor;
      do {
        const args = { job_id: jobId, max_chars: s.max_chars };
        if (cursor !== undefined) args.cursor = cursor;
        const r = await client.callTool({ name: "get_transcript_job", arguments: args });
        if (r.isError) return { start, status, pages, error: r };
        pages.push(r);
        cursor = r.structuredContent.next_cursor ?? undefined;
      } while (cursor !== undefined);
      return { start, status, pages };
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
