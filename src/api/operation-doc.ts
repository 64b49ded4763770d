/**
 * What a route says of itself for the OpenAPI document (openapi.ts): its
 * words, its body and query schemas, its answers. Beside the route table's
 * types (context.ts), which carry it, so that neither imports the other.
 */
import type * as v from "valibot";

export interface ResponseDoc {
  description: string;
  /** The JSON body's shape. */
  schema?: v.GenericSchema;
  /** A body that is not JSON: its media type and JSON Schema. */
  raw?: { contentType: string; schema: Record<string, unknown> };
}

export interface OperationDoc {
  summary: string;
  description?: string;
  /** The schema parseBody() checks the body with. */
  body?: v.GenericSchema;
  /** Who may call it, when not "an admin" (a public route: anyone); names of components.securitySchemes. */
  security?: Record<string, string[]>[];
  /** The object schema parseQuery() checks the query string with; one parameter per entry. */
  query?: v.ObjectSchema<v.ObjectEntries, v.ErrorMessage<v.ObjectIssue> | undefined>;
  responses: Record<number, ResponseDoc>;
}

