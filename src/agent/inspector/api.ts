/**
 * The inspector's HTTP face, as one fetch handler (tests call it with a
 * Request, no socket): the guard first (guard.ts), then the JSON API, then
 * the bundled page. Refusals are InspectorErrors answered as
 * `{"error": message, "code": CODE}`; anything else is a bug, answered
 * with a bare 500 and logged without the request's contents.
 *
 *   GET    /api/tunnels                 the tunnels of this agent; POST starts one (tunnels-api.ts)
 *   GET    /api/tunnels/:name           one of them; DELETE stops it
 *   GET    /api/flows?tunnel=           udp tunnels' flows, open then ended (flows.ts)
 *   GET    /api/requests?tunnel=&limit= captures, newest first, no bodies
 *   DELETE /api/requests                forget them all
 *   GET    /api/requests/stream         server-sent events (live.ts)
 *   GET    /api/requests/:id            one capture, bodies base64
 *   POST   /api/requests/:id/replay     send it again, maybe edited (replay.ts)
 */
import type { RequestTimeouts } from "../../runtime/types.ts";
import * as v from "valibot";
import { log } from "../../log.ts";
import type { ListenAddress } from "./address.ts";
import { badRequest, InspectorError } from "./errors.ts";
import { refusal, SECURITY_HEADERS } from "./guard.ts";
import type { FlowList } from "./flows.ts";
import { detailJson, summaryJson } from "./json.ts";
import { tunnelsRoute } from "./tunnels-api.ts";
import type { TunnelSet } from "../tunnel-set.ts";
import { MAX_BODY_BYTES } from "./limits.ts";
import type { LiveStreams } from "./live.ts";
import { replay, type ReplayEdits } from "./replay.ts";
import type { CaptureStore } from "./store.ts";
import type { InspectorPage } from "./ui.ts";

export interface InspectorAppDeps {
  store: CaptureStore;
  live: LiveStreams;
  flows: FlowList;
  page: InspectorPage;
  /** Where the inspector listens (its real port): the Host check's reference. */
  bound: () => ListenAddress;
  /** The agent's tunnels by source, which the agent API changes (tunnels-api.ts); undefined: shown, not changed. */
  tunnels?: () => TunnelSet | undefined;
}

/** A replay's JSON: a 1 MiB body in base64, and room for the rest. */
const MAX_REPLAY_JSON_BYTES = 2 * MAX_BODY_BYTES;
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

const HeaderName = v.pipe(v.string(), v.maxLength(256), v.regex(TOKEN, "a header name must be an HTTP token"));
const HeaderValue = v.pipe(v.string(), v.maxLength(65536), v.regex(FIELD_VALUE, "a header value must not hold CR, LF or other control characters"));
const ReplayBody = v.strictObject({
  method: v.optional(v.pipe(v.string("must be a string"), v.maxLength(32), v.regex(TOKEN, "method must be an HTTP token such as GET or POST"))),
  path: v.optional(
    v.pipe(v.string("must be a string"), v.maxLength(65536), v.regex(/^\/[\x21-\x7e]*$/, "path must start with / and hold no spaces or control characters")),
  ),
  headers: v.optional(
    v.union(
      [v.pipe(v.array(v.tuple([HeaderName, HeaderValue])), v.maxLength(1000)), v.record(HeaderName, v.nullable(HeaderValue))],
      "headers must be a list of [name, value] pairs or an object of name: value (null removes one)",
    ),
  ),
  body: v.optional(v.pipe(v.string("must be a string (base64)"), v.regex(BASE64, "body must be base64"))),
}, "unknown key (allowed: method, path, headers, body)");

export function createInspectorApp(deps: InspectorAppDeps) {
  const { store, live, page } = deps;

  const json = (body: unknown, status = 200, headers: Record<string, string> = {}) => Response.json(body, { status, headers: { ...SECURITY_HEADERS, ...headers } });
  const failure = (err: InspectorError) => json({ error: err.message, code: err.code, ...err.extra }, err.status, err.headers);

  async function route(req: Request, server: RequestTimeouts, path: string, query: URLSearchParams): Promise<Response> {
    const method = req.method;
    // the agent API's tunnels (tunnels-api.ts)
    const tunnels = await tunnelsRoute({ tunnels: deps.tunnels ?? (() => undefined), views: () => store.tunnels, bound: deps.bound }, req, server, path, json);
    if (tunnels) return tunnels;
    if (path === "/api/flows") {
      only(method, ["GET"], path);
      return json({ flows: deps.flows.list(query.get("tunnel") || undefined) });
    }
    if (path === "/api/requests") {
      only(method, ["GET", "DELETE"], path);
      if (method === "DELETE") {
        store.clear();
        return new Response(null, { status: 204, headers: SECURITY_HEADERS });
      }
      const limit = parseLimit(query.get("limit"), store.keep);
      const tunnel = query.get("tunnel") || undefined;
      return json({ requests: store.list({ tunnel, limit }).map(summaryJson) });
    }
    if (path === "/api/requests/stream") {
      only(method, ["GET"], path);
      return live.open(req, server, SECURITY_HEADERS);
    }
    const one = /^\/api\/requests\/([^/]+)(\/replay)?$/.exec(path);
    if (one) {
      const capture = store.get(parseId(one[1]!));
      if (one[2]) {
        only(method, ["POST"], path);
        if (!capture) throw notFound(one[1]!);
        const edits = await readEdits(req);
        const tunnel = store.tunnels.find((t) => t.name === capture.tunnel.name) ?? capture.tunnel;
        return json(summaryJson(await replay(store, capture, tunnel, edits)), 201);
      }
      only(method, ["GET"], path);
      if (!capture) throw notFound(one[1]!);
      return json(detailJson(capture));
    }
    if (path.startsWith("/api/") || path === "/api") throw new InspectorError("NOT_FOUND", `no such endpoint: ${method} ${path}`);
    only(method, ["GET", "HEAD"], path);
    const file = await page.file(path);
    if (!file) throw new InspectorError("NOT_FOUND", `no such page: ${path}`);
    return new Response(method === "HEAD" ? null : file.body, { headers: { ...SECURITY_HEADERS, "Content-Type": file.type } });
  }

  return {
    async fetch(req: Request, server: RequestTimeouts): Promise<Response> {
      try {
        const refused = refusal(req, deps.bound());
        if (refused) throw refused;
        const url = URL.parse(req.url.startsWith("/") ? `http://inspector${req.url}` : req.url);
        if (!url) throw badRequest("the request target cannot be read");
        return await route(req, server, url.pathname, url.searchParams);
      } catch (err) {
        if (err instanceof InspectorError) return failure(err);
        // the method and path only: a capture's contents (cookies, tokens, bodies) never reach a log
        log.error("inspector request failed", { method: req.method, path: URL.parse(req.url)?.pathname, err: String((err as Error)?.message ?? err).slice(0, 200) });
        return json({ error: "internal error", code: "INTERNAL" }, 500);
      }
    },
  };
}

function only(method: string, allowed: string[], path: string): void {
  if (!allowed.includes(method)) throw new InspectorError("METHOD_NOT_ALLOWED", `method ${method} is not allowed on ${path}`, { Allow: allowed.join(", ") });
}

const notFound = (id: string) => new InspectorError("NOT_FOUND", `no captured request ${id} (it may have been cleared or pushed out by newer ones)`);

function parseId(raw: string): number {
  if (!/^[1-9][0-9]{0,15}$/.test(raw) || !Number.isSafeInteger(Number(raw))) throw badRequest(`request id must be a positive integer (got '${raw.slice(0, 40)}')`);
  return Number(raw);
}

function parseLimit(raw: string | null, keep: number): number {
  if (raw === null || raw === "") return keep;
  const n = /^[0-9]{1,9}$/.test(raw) ? Number(raw) : NaN;
  if (!(n >= 1)) throw badRequest(`limit must be a whole number from 1 to ${keep} (got '${raw.slice(0, 40)}')`);
  return Math.min(n, keep);
}

/** The replay's edits from its JSON body (an empty body: none). */
async function readEdits(req: Request): Promise<ReplayEdits> {
  const declared = Number(req.headers.get("content-length") ?? "0");
  const tooLarge = () => new InspectorError("PAYLOAD_TOO_LARGE", `a replay's JSON may be at most ${MAX_REPLAY_JSON_BYTES} bytes`);
  if (declared > MAX_REPLAY_JSON_BYTES) throw tooLarge();
  const chunks: Uint8Array[] = [];
  let size = 0;
  if (req.body) {
    for await (const chunk of req.body as unknown as AsyncIterable<Uint8Array>) {
      size += chunk.byteLength;
      if (size > MAX_REPLAY_JSON_BYTES) throw tooLarge();
      chunks.push(chunk);
    }
  }
  const text = Buffer.concat(chunks).toString("utf8");
  if (text.trim() === "") return {};
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw badRequest("the request body is not valid JSON");
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw badRequest("the request body must be a JSON object");
  const parsed = v.safeParse(ReplayBody, value);
  if (!parsed.success) {
    const issue = parsed.issues[0]!;
    const where = v.getDotPath(issue);
    throw badRequest(where ? `${where}: ${issue.message}` : issue.message);
  }
  const edits = parsed.output;
  let body: Uint8Array | undefined;
  if (edits.body !== undefined) {
    body = Buffer.from(edits.body, "base64");
    if (body.byteLength > MAX_BODY_BYTES) throw new InspectorError("PAYLOAD_TOO_LARGE", `a replay's body may be at most ${MAX_BODY_BYTES} bytes`);
  }
  return { method: edits.method, path: edits.path, headers: edits.headers as ReplayEdits["headers"], body };
}
