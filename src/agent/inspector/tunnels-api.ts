/**
 * The agent API's tunnels, on the inspector's port (ngrok's agent API
 * shapes): list them, start one, stop one, without touching the others or
 * their requests in flight (agent/tunnel-set.ts, then the live session's
 * ADD and REMOVE).
 *
 *   GET    /api/tunnels           {tunnels: [...], uri}
 *   POST   /api/tunnels           {name, proto, addr, ...burrow.yml's keys} -> 201 the tunnel
 *   GET    /api/tunnels/:name     the tunnel
 *   DELETE /api/tunnels/:name     204
 *
 * Changes are taken only on a loopback address, from a loopback client:
 * the API has no authentication (ngrok's neither), so it is this machine's
 * alone; the guard (guard.ts) has already refused another Host and another
 * site's page.
 */
import type { TunnelSource, TunnelSet } from "../tunnel-set.ts";
import type { TunnelView } from "../output.ts";
import { readTunnelsJson, TunnelsJsonError, MAX_TUNNELS_JSON_BYTES } from "../settings/tunnels-json.ts";
import { isLoopback, type ListenAddress } from "./address.ts";
import { badRequest, InspectorError } from "./errors.ts";
import { tunnelJson } from "./json.ts";

export interface TunnelsApiDeps {
  /** The agent's tunnels by source; undefined where they are not the API's to change (burrow-agent's own inspector). */
  tunnels: () => TunnelSet | undefined;
  /** What is live, for an agent without a TunnelSet. */
  views: () => TunnelView[];
  bound: () => ListenAddress;
}

/** A tunnel as the agent API shows it: ngrok's fields (name, uri, public_url, proto, config) beside the inspector's own. */
function shown(t: TunnelView & { source?: TunnelSource }) {
  return {
    ...tunnelJson(t),
    uri: `/api/tunnels/${encodeURIComponent(t.name)}`,
    proto: t.url.startsWith("https:") ? "https" : t.protocol,
    config: { addr: `${t.target.tls ? "https" : "http"}://${t.local.replace(/^https:\/\//, "")}`, inspect: t.protocol === "http" && t.inspect },
    ...(t.source ? { source: t.source } : {}),
  };
}

/** The answer to a request for /api/tunnels or /api/tunnels/NAME; undefined for any other path. */
export async function tunnelsRoute(deps: TunnelsApiDeps, req: Request, server: unknown, path: string, json: (body: unknown, status?: number) => Response): Promise<Response | undefined> {
  const method = req.method;
  const list = () => deps.tunnels()?.live() ?? deps.views();
  if (path === "/api/tunnels") {
    if (method === "GET") return json({ tunnels: list().map(shown), uri: "/api/tunnels" });
    if (method !== "POST") throw notAllowed(method, path, "GET, POST");
    const set = changeable(deps, req, server);
    const body = await readBody(req);
    const { name, ...settings } = body;
    if (typeof name !== "string" || name === "") throw badRequest("name: missing (the tunnel's name, as a key of burrow.yml's tunnels)");
    if (set.sourceOf(name) !== undefined) throw new InspectorError("TUNNEL_EXISTS", `a tunnel named '${name}' runs already (DELETE /api/tunnels/${name} first)`);
    let tunnel;
    try {
      [tunnel] = readTunnelsJson({ tunnels: { [name]: settings } });
    } catch (err) {
      if (!(err instanceof TunnelsJsonError)) throw err;
      // the field as the body names it: `subdomain`, not `tunnels.NAME.subdomain`
      const prefix = `tunnels.${name}`;
      const field = err.field === prefix ? "" : err.field.startsWith(`${prefix}.`) ? err.field.slice(prefix.length + 1) : err.field;
      throw badRequest(field ? `${field}: ${err.reason}` : err.reason);
    }
    const change = await set.add("api", tunnel!);
    const refused = change.refused.find((r) => r.name === name);
    if (refused) {
      throw new InspectorError("TUNNEL_REFUSED", `the server refused tunnel '${name}': ${refused.code}: ${refused.message}`, {}, { refusal: { code: refused.code, message: refused.message } });
    }
    const live = list().find((t) => t.name === name);
    if (live) return json(shown(live), 201);
    // the connection is down: the tunnel is asked for when it is back
    return json({ name, uri: `/api/tunnels/${encodeURIComponent(name)}`, status: "pending" }, 202);
  }
  const one = /^\/api\/tunnels\/([^/]+)$/.exec(path);
  if (!one) return undefined;
  let name: string;
  try {
    name = decodeURIComponent(one[1]!);
  } catch {
    throw badRequest("the tunnel's name in the path cannot be read");
  }
  if (method === "GET") {
    const t = list().find((x) => x.name === name);
    if (!t) throw new InspectorError("NOT_FOUND", `no tunnel named '${name}' runs`);
    return json(shown(t));
  }
  if (method !== "DELETE") throw notAllowed(method, path, "GET, DELETE");
  const set = changeable(deps, req, server);
  const source = set.sourceOf(name);
  if (source === undefined) throw new InspectorError("NOT_FOUND", `no tunnel named '${name}' runs`);
  if (source === "remote") throw new InspectorError("MANAGED_BY_SERVER", `tunnel '${name}' is the server's remote config's: it is changed there`);
  await set.remove(source, name);
  return new Response(null, { status: 204 });
}

/** The tunnel set, when this request may change it: on a loopback address, from a loopback client. */
function changeable(deps: TunnelsApiDeps, req: Request, server: unknown): TunnelSet {
  const set = deps.tunnels();
  if (!set) throw new InspectorError("NOT_CHANGEABLE", "this agent's tunnels are changed by its program, not through this API");
  const client = (server as { requestIP?(r: Request): { address: string } | null }).requestIP?.(req)?.address;
  if (!isLoopback(deps.bound().host) || (client !== undefined && !isLoopback(client.replace(/^::ffff:/, "")))) {
    throw new InspectorError("LOOPBACK_ONLY", "tunnels are started and stopped only through the inspector on a loopback address, from this machine");
  }
  return set;
}

const notAllowed = (method: string, path: string, allow: string) => new InspectorError("METHOD_NOT_ALLOWED", `method ${method} is not allowed on ${path}`, { Allow: allow });

/** The JSON object of the request's body, within MAX_TUNNELS_JSON_BYTES. */
async function readBody(req: Request): Promise<Record<string, unknown>> {
  const tooLarge = () => new InspectorError("PAYLOAD_TOO_LARGE", `a tunnel's JSON may be at most ${MAX_TUNNELS_JSON_BYTES} bytes`);
  if (Number(req.headers.get("content-length") ?? "0") > MAX_TUNNELS_JSON_BYTES) throw tooLarge();
  const chunks: Uint8Array[] = [];
  let size = 0;
  if (req.body) {
    for await (const chunk of req.body as unknown as AsyncIterable<Uint8Array>) {
      size += chunk.byteLength;
      if (size > MAX_TUNNELS_JSON_BYTES) throw tooLarge();
      chunks.push(chunk);
    }
  }
  let value: unknown;
  try {
    value = JSON.parse(Buffer.concat(chunks).toString("utf8"));
  } catch {
    throw badRequest("the request body is not valid JSON");
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw badRequest("the request body must be a JSON object: {name, proto, addr, ...}");
  return value as Record<string, unknown>;
}
