// Validates an OpenAPI 3.1 document: its structure against the official schema (@seriousme/openapi-schema-validator),
// then what that schema cannot see: every $ref resolves, every schema compiles under JSON Schema 2020-12, and every
// example matches the schema it illustrates. Prints each problem on its own line; exits 1 on any, 2 on bad usage.
import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Validator } from "@seriousme/openapi-schema-validator";
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";

const here = dirname(fileURLToPath(import.meta.url));
const file = resolve(process.argv[2] ?? resolve(here, "../../gateway/http/openapi.json"));
const BASE = "https://vts.invalid/openapi.json";

let doc;
try {
  doc = JSON.parse(readFileSync(file, "utf8"));
} catch (e) {
  console.error(`${file}: not readable JSON: ${e.message}`);
  process.exit(2);
}

const problems = [];

const validator = new Validator();
const res = await validator.validate(structuredClone(doc));
if (!res.valid) {
  for (const e of res.errors) problems.push(`schema: ${e.instancePath || "/"} ${e.message} ${JSON.stringify(e.params)}`);
}
if (!/^3\.1\.\d+$/.test(doc.openapi ?? "")) problems.push(`openapi is ${doc.openapi}, expected 3.1.x`);

// Walks every value with its JSON pointer.
function* walk(node, path = "") {
  yield [node, path];
  if (node && typeof node === "object") {
    for (const [k, v] of Object.entries(node)) {
      yield* walk(v, `${path}/${String(k).replaceAll("~", "~0").replaceAll("/", "~1")}`);
    }
  }
}

function pointer(ptr) {
  let node = doc;
  for (const raw of ptr.split("/").slice(1)) {
    const key = raw.replaceAll("~1", "/").replaceAll("~0", "~");
    if (node === null || typeof node !== "object" || !(key in node)) return undefined;
    node = node[key];
  }
  return node;
}

for (const [node, path] of walk(doc)) {
  if (node && typeof node === "object" && typeof node.$ref === "string") {
    if (!node.$ref.startsWith("#/")) problems.push(`${path}: $ref ${node.$ref} is not local`);
    else if (pointer(node.$ref.slice(1)) === undefined) problems.push(`${path}: $ref ${node.$ref} does not resolve`);
  }
}

// Schemas are compiled as parts of one schema resource holding the whole components section, so that local refs
// ("#/components/schemas/X") resolve; other refs are rewritten to point into it.
const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: true });
addFormats(ajv);
const absolute = (node) =>
  JSON.parse(JSON.stringify(node), (k, v) => (k === "$ref" && typeof v === "string" && v.startsWith("#/") ? BASE + v : v));
ajv.addSchema({ $id: BASE, components: absolute(doc.components ?? {}) });

const deref = (node) => (node && node.$ref ? deref(pointer(node.$ref.slice(1))) : node);

function checkExamples(where, schema, media) {
  let validate;
  try {
    validate = ajv.compile(absolute(schema));
  } catch (e) {
    problems.push(`${where}: schema does not compile: ${e.message}`);
    return;
  }
  const examples = [];
  if (media && "example" in media) examples.push(["example", media.example]);
  for (const [name, ex] of Object.entries(media?.examples ?? {})) {
    const e = deref(ex);
    if (e && "value" in e) examples.push([`examples/${name}`, e.value]);
  }
  for (const [name, value] of examples) {
    if (!validate(value)) {
      for (const e of validate.errors) problems.push(`${where} ${name}: ${e.instancePath || "/"} ${e.message}`);
    }
  }
}

for (const [name, schema] of Object.entries(doc.components?.schemas ?? {})) {
  checkExamples(`components/schemas/${name}`, schema, null);
}
for (const [p, item] of Object.entries(doc.paths ?? {})) {
  for (const [method, op] of Object.entries(item)) {
    if (!op || typeof op !== "object" || !op.responses) continue;
    for (const param of op.parameters ?? []) {
      const prm = deref(param);
      if (prm?.schema) checkExamples(`${method} ${p} parameter ${prm.name}`, prm.schema, prm);
    }
    for (const [status, resp] of Object.entries(op.responses)) {
      const r = deref(resp);
      for (const [type, media] of Object.entries(r?.content ?? {})) {
        if (media.schema) checkExamples(`${method} ${p} ${status} ${type}`, media.schema, media);
      }
      for (const [hname, h] of Object.entries(r?.headers ?? {})) {
        const hd = deref(h);
        if (hd?.schema) checkExamples(`${method} ${p} ${status} header ${hname}`, hd.schema, hd);
      }
    }
  }
}

if (problems.length > 0) {
  for (const line of problems) console.error(`${file}: ${line}`);
  process.exit(1);
}
console.log(`${file}: valid OpenAPI ${doc.openapi} (${validator.version ?? "?"}), examples match their schemas`);
