/**
 * docs/reference/api.md: every admin API route, from the OpenAPI document
 * the server serves at GET /api/openapi.json. The admin app is built as the
 * server builds it (every option that adds routes given) on a throwaway
 * database, and the document is asked of its own route handler: no port is
 * opened. Bodies and answers are the document's JSON Schemas, as tables.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Server } from "bun";
import { createAdminApp } from "../../src/admin/app.ts";
import { healthRoutes, Readiness } from "../../src/admin/health.ts";
import { metricsRoutes } from "../../src/admin/metrics.ts";
import { createCore } from "../../src/core/index.ts";
import { REQUEST_ERRORS, SERVER_FAULTS } from "../../src/core/errors.ts";
import { openDatabase } from "../../src/db/open.ts";
import { anchor, code, generatedNotice, page, table } from "./markdown.ts";

type Schema = Record<string, any>;
type Operation = Record<string, any>;

/**
 * The admin app as the server builds it (every option that adds routes
 * given), on a throwaway database that is gone when `use` returns. Also what
 * test/admin/openapi.test.ts reads the live route table from.
 */
export async function withFullAdminApp<T>(use: (app: ReturnType<typeof createAdminApp>) => T | Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), "burrow-admin-app-"));
  const database = openDatabase(dir);
  try {
    const core = createCore({ store: database.store, systemSubdomains: [] });
    const app = createAdminApp(core, {
      publicInfo: () => undefined,
      backup: { dataDir: dir, sqlite: database.sqlite },
      certificates: () => ({ mode: "off", certificates: [] }),
      portalOrigin: () => "https://tunnels.example.com",
      // as src/server.ts gives them
      operations: [...metricsRoutes({ render: async () => "", contentType: "text/plain" }, undefined), ...healthRoutes(new Readiness({}))],
    });
    return await use(app);
  } finally {
    database.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The document exactly as GET /api/openapi.json answers it. */
export function servedOpenApi(): Promise<Record<string, any>> {
  return withFullAdminApp(async (app) => {
    const handlers = app.routes["/api/openapi.json"] as Record<string, (req: Request, server: Server<unknown>) => Promise<Response>>;
    const server = { requestIP: () => ({ address: "127.0.0.1", family: "IPv4", port: 0 }) } as unknown as Server<unknown>;
    const res = await handlers.GET!(new Request("http://127.0.0.1/api/openapi.json", { headers: { host: "127.0.0.1" } }), server);
    if (res.status !== 200) throw new Error(`GET /api/openapi.json answered ${res.status}`);
    return (await res.json()) as Record<string, any>;
  });
}

/** Past this, a maximum is only "a safe integer": not worth saying. */
const NO_LIMIT = Number.MAX_SAFE_INTEGER;

/** The document's words as markdown: an <angle> placeholder shown, not taken for HTML. */
const words = (text: string | undefined) => text?.replace(/[<>]/g, "\\$&");

const literal = (value: unknown) => code(typeof value === "string" ? value : JSON.stringify(value));

/** A JSON Schema as a few words: `integer, 1 to 365`, `` `user` or `admin` ``, `array of string, at most 64`. */
export function typeWords(s: Schema): string {
  if (s.const !== undefined) return literal(s.const);
  if (s.enum) return (s.enum as unknown[]).map(literal).join(" or ");
  if (s.anyOf) return (s.anyOf as Schema[]).map(typeWords).join(" or ");
  const type = Array.isArray(s.type) ? s.type.join(" or ") : (s.type ?? "any");
  const bits: string[] = [];
  if (s.format) bits.push(s.format);
  if (s.contentMediaType) bits.push(code(s.contentMediaType));
  if (s.minLength !== undefined || s.maxLength !== undefined) bits.push(range(s.minLength, s.maxLength, "characters"));
  if (s.pattern) bits.push(`matching ${code(s.pattern)}`);
  if (s.minimum !== undefined || (s.maximum !== undefined && s.maximum < NO_LIMIT)) bits.push(range(s.minimum, s.maximum < NO_LIMIT ? s.maximum : undefined));
  if (type === "array") return [`array of ${s.items ? typeWords(s.items) : "any"}`, ...(s.maxItems !== undefined ? [`at most ${s.maxItems}`] : [])].join(", ");
  if (type === "object" && !s.properties && s.additionalProperties && typeof s.additionalProperties === "object") return `object of ${typeWords(s.additionalProperties)}`;
  return [type, ...bits].join(", ");
}

function range(min: number | undefined, max: number | undefined, unit = ""): string {
  const u = unit ? ` ${unit}` : "";
  if (min !== undefined && max !== undefined) return `${min} to ${max}${u}`;
  return min !== undefined ? `at least ${min}${u}` : `at most ${max}${u}`;
}

/** The objects a schema holds fields of: itself, its array's items, the object among its anyOf. */
function objectOf(s: Schema): Schema | undefined {
  if (s.properties) return s;
  if (s.type === "array" && s.items) return objectOf(s.items);
  if (s.anyOf) {
    const objects = (s.anyOf as Schema[]).map(objectOf).filter(Boolean);
    return objects.length === 1 ? objects[0] : undefined;
  }
  return undefined;
}

/** How a table of fields says which must be there: a body's "required", an answer's "optional". */
interface Presence {
  column: string;
  word: (required: boolean) => string;
}
const BODY: Presence = { column: "required", word: (required) => (required ? "required" : "") };
const ANSWER: Presence = { column: "note", word: (required) => (required ? "" : "optional") };

/** One row per field, nested ones as `user.id` and `items[].name`. */
function fieldRows(s: Schema, prefix: string, presence: Presence): string[][] {
  const required = new Set<string>(s.required ?? []);
  return Object.entries(s.properties as Record<string, Schema>).flatMap(([name, field]) => {
    const path = `${prefix}${name}`;
    const row = [code(path), typeWords(field), presence.word(required.has(name))];
    const inner = objectOf(field);
    if (!inner) return [row];
    const sub = field.type === "array" || field.anyOf?.some((a: Schema) => a.type === "array") ? `${path}[].` : `${path}.`;
    return [row, ...fieldRows(inner, sub, presence)];
  });
}

/** A body's fields as a table; an array of objects by its items' fields; alternatives one after the other. */
function schemaTables(s: Schema, presence: Presence, lead: string): string[] {
  const alternatives = s.anyOf && (s.anyOf as Schema[]).every((a) => objectOf(a)) ? (s.anyOf as Schema[]) : [s];
  return alternatives.flatMap((alt, i) => {
    const object = objectOf(alt);
    if (!object) return [];
    const what = alt.type === "array" ? "an array of objects with" : "an object with";
    const title = alternatives.length === 1 ? `${lead} ${what}:` : i === 0 ? `${lead} either ${what}:` : `or ${what}:`;
    return [title, table(["field", "type", presence.column], fieldRows(object, "", presence))];
  });
}

/** The generic statuses the document gives every route of a kind, said with the codes behind them. */
function errorWords(status: string): string {
  const codes = Object.entries({ ...REQUEST_ERRORS, ...SERVER_FAULTS })
    .filter(([, e]) => String(e.status) === status)
    .map(([name]) => `[${code(name)}](codes.md#admin-api-errors)`);
  return codes.length > 0 ? `error: ${codes.join(", ")}` : "error";
}

function answerRow(status: string, r: Schema): string[] {
  const isError = r.$ref === "#/components/responses/Error";
  const label = status === "default" ? "other" : status;
  if (isError) {
    if (status === "default") return [label, "any other error, e.g. 500 [`INTERNAL`](codes.md#server-faults), 503 [`DATABASE_UNAVAILABLE`](codes.md#server-faults)", code('{"error": message}')];
    return [label, errorWords(status), code('{"error": message}')];
  }
  const [type, media] = Object.entries((r.content ?? {}) as Record<string, Schema>)[0] ?? [];
  const body = media ? (type === "application/json" ? typeWords(media.schema) : `${code(type!)}${media.schema?.const ? ` ${literal(media.schema.const)}` : ""}`) : status.startsWith("2") ? "" : code('{"error": message}');
  return [label, words(r.description) ?? "", body];
}

/** The document's security schemes, as a sentence says them. */
const CREDENTIAL_WORDS: Record<string, string> = {
  session: "an admin's session",
  apiKey: "an admin API key",
  metricsToken: "the server's `--metrics-token` as a bearer token",
};

function who(op: Operation, schemes: Record<string, Schema>, signedIn: string): string {
  if (!op.security) return signedIn;
  if (op.security.length === 0) return "anyone: no session needed";
  return (op.security as Record<string, unknown>[])
    .flatMap((s) => Object.keys(s))
    .map((name) => CREDENTIAL_WORDS[name] ?? `${code(name)} (${words(schemes[name]?.description) ?? ""})`)
    .join(", or ");
}

/** One route's method: who may call it, its parameters, body and answers. `signedIn`: who a route without its own security needs. */
export function operationSection(method: string, path: string, op: Operation, schemes: Record<string, Schema>, signedIn = "an admin: the session cookie, or an admin API key"): string {
  const params = (op.parameters ?? []) as Schema[];
  const body = op.requestBody?.content?.["application/json"]?.schema as Schema | undefined;
  const answers = Object.entries(op.responses as Record<string, Schema>);
  const answerTables = answers.flatMap(([status, r]) => {
    const schema = r.content?.["application/json"]?.schema as Schema | undefined;
    return schema ? schemaTables(schema, ANSWER, `The ${status} answer is`) : [];
  });
  return page([
    `### \`${method.toUpperCase()} ${path}\``,
    words(op.summary),
    words(op.description),
    `Who may call it: ${who(op, schemes, signedIn)}.`,
    params.length > 0
      ? page(["Parameters:", table(["name", "in", "type", "required"], params.map((p) => [code(p.name), p.in, typeWords(p.schema), p.required ? "required" : ""]))])
      : undefined,
    body ? page(schemaTables(body, BODY, "The body (JSON) is")) : undefined,
    page(["Answers:", table(["status", "meaning", "body"], answers.map(([status, r]) => answerRow(status, r)))]),
    ...answerTables,
  ]);
}

/** The group a route is listed under: its tag, the operations endpoints (/metrics, /healthz, /readyz) together. */
const groupOf = (op: Operation) => (op.tags?.[0] === "api" ? "operations" : (op.tags?.[0] ?? "operations"));

export async function apiReference(): Promise<string> {
  const doc = await servedOpenApi();
  const schemes = doc.components.securitySchemes as Record<string, Schema>;
  const groups = new Map<string, string[]>();
  for (const [path, methods] of Object.entries(doc.paths as Record<string, Record<string, Operation>>)) {
    for (const [method, op] of Object.entries(methods)) {
      const group = groupOf(op);
      groups.set(group, [...(groups.get(group) ?? []), operationSection(method, path, op, schemes)]);
    }
  }
  const index = table(
    ["group", "routes"],
    [...groups.keys()].map((g) => [`[${g}](#${anchor(g)})`, String(groups.get(g)!.length)]),
  );
  return page([
    generatedNotice("the OpenAPI document the server serves at `GET /api/openapi.json` (`build/reference/api.ts`)"),
    "# Admin API",
    words(doc.info.description),
    "The API listens on the server's `--admin-port` (4041), on `--admin-host` (loopback unless told otherwise). Bodies are JSON; the server reads any body as JSON whatever its Content-Type. Errors are `{\"error\": message}`, with the status of their code: see [the codes](codes.md#admin-api-errors). The same document, with the full JSON Schemas, is at `GET /api/openapi.json`.",
    page([
      "Credentials:",
      table(
        ["name", "kind", "how"],
        Object.entries(schemes).map(([name, s]) => [code(name), s.type === "apiKey" ? `${s.in} ${code(s.name)}` : `${s.scheme}${s.bearerFormat ? ` (${s.bearerFormat})` : ""}`, words(s.description) ?? ""]),
      ),
    ]),
    index,
    ...[...groups.entries()].map(([group, sections]) => page([`## ${group}`, ...sections])),
  ]);
}
