/** Request parsing and response building shared by every admin route. */
import * as v from "valibot";
import { AppError, badRequest } from "../core/errors.ts";
import { describeIssues } from "../validate/fields.ts";

export const MAX_BODY_BYTES = 1024 * 1024;

export const json = (body: unknown, status = 200, headers: Record<string, string> = {}) =>
  Response.json(body, { status, headers: { "Cache-Control": "no-store", ...headers } });

export function errorResponse(err: AppError): Response {
  return json({ error: err.message }, err.status, err.headers);
}

/**
 * The client closed its connection before the request was whole (in the
 * middle of its body): nobody is left to answer, and it is no fault of the
 * server's, so the handler's wrapper logs nothing and answers nothing.
 */
export class ClientGone extends Error {
  constructor() {
    super("the client closed the connection before its request was whole");
  }
}

/** Reads at most MAX_BODY_BYTES of the body, whatever the Content-Length claims. */
async function readBodyText(req: Request): Promise<string> {
  const tooLarge = () => new AppError("PAYLOAD_TOO_LARGE", `request body is larger than ${MAX_BODY_BYTES} bytes`);
  const declared = Number(req.headers.get("content-length") ?? "0");
  if (declared > MAX_BODY_BYTES) throw tooLarge();
  if (!req.body) return "";
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    for await (const chunk of req.body as unknown as AsyncIterable<Uint8Array>) {
      size += chunk.byteLength;
      if (size > MAX_BODY_BYTES) throw tooLarge();
      chunks.push(chunk);
    }
  } catch (err) {
    // Bun fails the body's read with an AbortError when the client closes mid-body
    if (req.signal.aborted && !(err instanceof AppError)) throw new ClientGone();
    throw err;
  }
  return Buffer.concat(chunks).toString("utf8");
}

/**
 * The JSON body checked against a schema. Any content type is read as JSON
 * (curl -d sends form encoding unless told otherwise); an empty body is {}.
 */
export async function parseBody<S extends v.GenericSchema>(req: Request, schema: S): Promise<v.InferOutput<S>> {
  const text = await readBodyText(req);
  let value: unknown = {};
  if (text.trim() !== "") {
    try {
      value = JSON.parse(text);
    } catch {
      throw badRequest("request body is not valid JSON");
    }
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw badRequest("request body must be a JSON object");
  }
  const result = v.safeParse(schema, value);
  if (!result.success) throw badRequest(describeIssues(result.issues));
  return result.output;
}

/**
 * The query string checked against a schema of string fields: each present
 * parameter (its first value when repeated); unknown ones are ignored.
 */
export function parseQuery<S extends v.GenericSchema>(req: Request, schema: S): v.InferOutput<S> {
  const params = new URL(req.url).searchParams;
  const value: Record<string, string> = {};
  for (const [name, text] of params) if (!(name in value)) value[name] = text;
  const result = v.safeParse(schema, value);
  if (!result.success) throw badRequest(describeIssues(result.issues));
  return result.output;
}

const ID_PATTERN = /^[1-9][0-9]{0,15}$/;

/** A positive integer from a path or query parameter, else 400 naming it. */
export function parseId(raw: string | undefined, name = "id"): number {
  if (raw === undefined || !ID_PATTERN.test(raw) || !Number.isSafeInteger(Number(raw))) {
    throw badRequest(`${name} must be a positive integer`);
  }
  return Number(raw);
}
