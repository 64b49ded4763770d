/**
 * GET /api/openapi.json: an OpenAPI 3.1 document of the whole admin API,
 * made at run time from the server's own route table. Request bodies and
 * query strings come from the valibot schemas that check them (schemas.ts),
 * answers from those the tests hold real answers to (responses.ts), so the
 * document cannot drift from what the server does. A route of the table
 * without documentation is left out, and test/admin/openapi.test.ts fails.
 */
import { toJsonSchema } from "@valibot/to-json-schema";
import * as v from "valibot";
import { VERSION } from "../version.ts";
import type { Method, Route } from "./context.ts";
import type { OperationDoc } from "../api/operation-doc.ts";
import { ErrorBody } from "../api/responses.ts";

type JsonSchema = Record<string, unknown>;

/** A route as the document sees it: where, which methods, whether it needs credentials, and its words. */
export interface DocumentedRoute {
  path: string;
  methods: string[];
  public?: boolean;
  docs?: Route["docs"];
}

/**
 * A valibot schema as JSON Schema 2020-12 (OpenAPI 3.1's dialect). What
 * JSON Schema cannot say (a transform, a check function) is left out: the
 * rule stays the server's. A query parameter is described as the value it
 * stands for (`limit` an integer), not as the text it travels as.
 */
export function jsonSchema(schema: v.GenericSchema, typeMode: "ignore" | "output" = "ignore"): JsonSchema {
  const { $schema: _, ...rest } = toJsonSchema(schema, { target: "draft-2020-12", errorMode: "ignore", typeMode }) as JsonSchema;
  return rest;
}

/** A query parameter's value: its text's pattern says nothing more once it is a number. */
function queryValue(schema: v.GenericSchema): JsonSchema {
  const { pattern, ...rest } = jsonSchema(schema, "output");
  return rest.type === "integer" || rest.type === "number" ? rest : { ...rest, ...(pattern === undefined ? {} : { pattern }) };
}

const errorRef = { $ref: "#/components/responses/Error" };

/** ":id" -> "{id}" */
export const openApiPath = (path: string) => path.replace(/:([a-z_]+)/g, "{$1}");

const tagOf = (path: string) => path.split("/")[2] ?? "api";

const capital = (w: string) => w.slice(0, 1).toUpperCase() + w.slice(1);

/** GET /api/users/:id/tokens -> getUsersByIdTokens */
function operationId(method: string, path: string): string {
  const words = path
    .split("/")
    .filter((w) => w !== "" && w !== "api")
    .map((w) => (w.startsWith(":") ? `By${capital(w.slice(1))}` : w.split(/[^A-Za-z0-9]+/).map(capital).join("")));
  return method.toLowerCase() + words.join("");
}

function operation(route: DocumentedRoute, method: string, doc: OperationDoc): Record<string, unknown> {
  const params = [...route.path.matchAll(/:([a-z_]+)/g)].map((m) => ({
    name: m[1],
    in: "path",
    required: true,
    schema: { type: "integer", minimum: 1 },
  }));
  const query = Object.entries(doc.query?.entries ?? {}).map(([name, schema]) => ({
    name,
    in: "query",
    required: schema.type !== "optional",
    schema: queryValue(schema),
  }));
  const responses: Record<string, unknown> = {};
  for (const [status, r] of Object.entries(doc.responses)) {
    const content = r.schema
      ? { "application/json": { schema: jsonSchema(r.schema) } }
      : r.raw
        ? { [r.raw.contentType]: { schema: r.raw.schema } }
        : undefined;
    responses[status] = { description: r.description, ...(content ? { content } : {}) };
  }
  // the errors every route of its kind can answer, in the one error shape
  const standard: [boolean, number][] = [
    [Boolean(doc.body || doc.query || params.length > 0), 400],
    [!route.public, 401],
    [!route.public, 403],
    [params.length > 0, 404],
    [Boolean(doc.body), 413],
  ];
  for (const [applies, status] of standard) if (applies && !(status in responses)) responses[status] = errorRef;
  responses.default = errorRef;
  return {
    operationId: operationId(method, route.path),
    summary: doc.summary,
    ...(doc.description ? { description: doc.description } : {}),
    tags: [tagOf(route.path)],
    ...(doc.security ? { security: doc.security } : route.public ? { security: [] } : {}),
    ...(params.length + query.length > 0 ? { parameters: [...params, ...query] } : {}),
    ...(doc.body ? { requestBody: { required: true, content: { "application/json": { schema: jsonSchema(doc.body) } } } } : {}),
    responses,
  };
}

export function buildOpenApi(routes: readonly DocumentedRoute[]): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    for (const method of route.methods) {
      const doc = route.docs?.[method as Method];
      if (!doc) continue;
      (paths[openApiPath(route.path)] ??= {})[method.toLowerCase()] = operation(route, method, doc);
    }
  }
  return {
    openapi: "3.1.0",
    info: {
      title: "burrow admin API",
      version: VERSION,
      description:
        "Users, device tokens, reserved subdomains, traffic, the audit log and admin API keys of a burrow server. Every endpoint but login, this document and the health checks needs an admin: the session cookie from POST /api/auth/login, or an admin API key as `Authorization: Bearer brk_...`. Errors are always {\"error\": \"<message>\"}.",
    },
    security: [{ session: [] }, { apiKey: [] }],
    paths,
    components: {
      securitySchemes: {
        session: { type: "apiKey", in: "cookie", name: "tunnel_admin_session", description: "Set by POST /api/auth/login." },
        apiKey: { type: "http", scheme: "bearer", bearerFormat: "brk_ followed by 43 base62 characters", description: "An admin API key (POST /api/keys)." },
        metricsToken: { type: "http", scheme: "bearer", description: "The server's --metrics-token, for a Prometheus scraper (GET /metrics only)." },
      },
      schemas: { Error: jsonSchema(ErrorBody) },
      responses: {
        Error: {
          description: "An error, in words",
          content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } },
        },
      },
    },
  };
}

/** The document's own route; `routes` is read when it is first asked for, once the table is whole. */
export function openApiRoutes(routes: () => readonly DocumentedRoute[]): Route[] {
  let document: string | undefined;
  return [
    {
      path: "/api/openapi.json",
      public: true,
      methods: {
        GET: () => {
          document ??= JSON.stringify(buildOpenApi(routes()));
          return new Response(document, { headers: { "Content-Type": "application/json", "Cache-Control": "no-store" } });
        },
      },
      docs: {
        GET: {
          summary: "This document: the admin API in OpenAPI 3.1 (no session needed)",
          responses: { 200: { description: "The OpenAPI document", raw: { contentType: "application/json", schema: { type: "object" } } } },
        },
      },
    },
  ];
}
