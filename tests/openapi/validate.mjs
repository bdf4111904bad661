// validate.mjs DOC SAMPLES — checks real etwd responses against etwd's own OpenAPI 3.1 document.
// DOC is the document as GET /api/v1/openapi.json served it; SAMPLES a JSON array of
// {method, path, status, ctype, body} collected from the running server by
// tests/e2e/test_openapi.py (path is the route template, e.g. /api/v1/sessions/{id}; body is the
// parsed JSON, or for application/x-ndjson an array of the parsed lines). For each sample the
// response the document declares for that operation and status (exact code, then 4XX/5XX, then
// default) must exist, list the content type, and its schema must accept the body (every line of
// an ndjson body). JSON Schema 2020-12 (the dialect of OpenAPI 3.1) by ajv with ajv-formats.
// Exit status 0 when every sample passes; one line per failure on stderr.
import { readFileSync } from "node:fs";
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";

const [docPath, samplesPath] = process.argv.slice(2);
const doc = JSON.parse(readFileSync(docPath, "utf8"));
const samples = JSON.parse(readFileSync(samplesPath, "utf8"));

const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);
// OpenAPI keywords that are not JSON Schema (annotations here)
for (const kw of ["discriminator", "xml", "externalDocs", "example"]) ajv.addKeyword(kw);
ajv.addSchema({ $id: "etwd:doc", components: doc.components }, "etwd:doc");

const fail = [];
let checked = 0;
const rewrite = (s) => JSON.parse(JSON.stringify(s).replaceAll('"#/components/', '"etwd:doc#/components/'));

for (const s of samples) {
  const what = `${s.method} ${s.path} → ${s.status} (${s.ctype})`;
  const op = doc.paths?.[s.path]?.[s.method.toLowerCase()];
  if (!op) {
    fail.push(`${what}: the document has no such operation`);
    continue;
  }
  const code = String(s.status);
  let resp = op.responses[code] ?? op.responses[`${code[0]}XX`] ?? op.responses.default;
  if (resp?.$ref) resp = resp.$ref.split("/").slice(1).reduce((o, k) => o?.[k], doc);
  if (!resp) {
    fail.push(`${what}: status not declared`);
    continue;
  }
  if (!s.ctype && s.body === null) { // no body (204): the document must declare none either
    if (resp.content) fail.push(`${what}: the document declares a body`);
    continue;
  }
  const media = resp.content?.[s.ctype];
  if (!media) {
    fail.push(`${what}: content type not declared (declared: ${Object.keys(resp.content ?? {}).join(", ") || "none"})`);
    continue;
  }
  if (!media.schema) continue;
  const validate = ajv.compile(rewrite(media.schema));
  const bodies = s.ctype === "application/x-ndjson" ? s.body : [s.body];
  bodies.forEach((b, i) => {
    checked++;
    if (!validate(b)) {
      const errs = validate.errors.slice(0, 5).map((e) => `${e.instancePath || "/"} ${e.message}`).join("; ");
      fail.push(`${what}${bodies.length > 1 ? ` line ${i + 1}` : ""}: ${errs}`);
    }
  });
}
for (const f of fail) console.error("FAIL " + f);
console.log(`${samples.length} responses, ${checked} bodies checked against the document, ${fail.length} failures`);
process.exit(fail.length ? 1 : 0);
