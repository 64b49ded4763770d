/**
 * burrow.yml's `tunnels:` map sent as JSON: by a script to the agent API
 * (POST /api/tunnels, one tunnel), and by the server's admin to a device
 * (its remote config, read by the admin API before it is kept and by the
 * agent when it comes). The same reader as the file's (tunnels-file.ts),
 * so the same tunnel spec holds (tunnel-spec.ts) and a mistake names the
 * same field, `tunnels.web.subdomain: ...`; only, as JSON it has no lines,
 * no server or token, no policy file, and may name no tunnel at all.
 */
import * as v from "valibot";
import { TunnelRequest } from "../../protocol/messages.ts";
import { MAX_PAYLOAD, MAX_SESSION_TUNNELS } from "../../protocol/wire.ts";
import { ConfigFileError, parseTunnelsFile, type FileTunnel } from "./tunnels-file.ts";

/** The largest tunnels map taken as JSON: far more than 16 tunnels with their rules and policies take, and under what one frame carries. */
export const MAX_TUNNELS_JSON_BYTES = 128 * 1024;

/** A mistake in a tunnels map: the field's path (`tunnels.web.addr`) and what is wrong with it. */
export class TunnelsJsonError extends Error {
  constructor(
    readonly field: string,
    readonly reason: string,
  ) {
    super(field ? `${field}: ${reason}` : reason);
  }
}

/**
 * `{ tunnels: { NAME: { proto, addr, ... } } }` read and checked, in the
 * map's order; a TunnelsJsonError for the first mistake. `value` is what
 * JSON.parse gave (any shape).
 */
export function readTunnelsJson(value: unknown): FileTunnel[] {
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw new TunnelsJsonError("", "must be a JSON object with 'tunnels'");
  const text = JSON.stringify(value);
  if (Buffer.byteLength(text) > MAX_TUNNELS_JSON_BYTES) throw new TunnelsJsonError("tunnels", `more than ${MAX_TUNNELS_JSON_BYTES / 1024} KiB of settings`);
  let tunnels: FileTunnel[];
  try {
    tunnels = parseTunnelsFile(text, "json", { json: true }).tunnels;
  } catch (err) {
    if (err instanceof ConfigFileError) throw new TunnelsJsonError(err.field, err.reason);
    throw err;
  }
  if (tunnels.length > MAX_SESSION_TUNNELS) throw new TunnelsJsonError("tunnels", `${tunnels.length} tunnels; one agent runs at most ${MAX_SESSION_TUNNELS}`);
  for (const t of tunnels) checkCarried(t);
  return tunnels;
}

/** One tunnel's settings as the protocol carries them: within its schema, and in one frame. */
function checkCarried(t: FileTunnel): void {
  const field = `tunnels.${t.name}`;
  const parsed = v.safeParse(TunnelRequest, t.request);
  if (!parsed.success) {
    const issue = parsed.issues[0]!;
    throw new TunnelsJsonError(`${field}${v.getDotPath(issue) ? `.${v.getDotPath(issue)}` : ""}`, `${issue.message} (more than the protocol carries)`);
  }
  if (Buffer.byteLength(JSON.stringify(t.request)) > MAX_PAYLOAD - 4096) throw new TunnelsJsonError(field, "its settings take more than one frame carries: fewer or shorter access rules");
}

/** The map the admin API keeps and sends: the value as it was checked, each tunnel's settings by its name. */
export function tunnelsMapOf(value: unknown): Record<string, unknown> {
  const tunnels = (value as { tunnels?: unknown }).tunnels;
  return typeof tunnels === "object" && tunnels !== null && !Array.isArray(tunnels) ? (tunnels as Record<string, unknown>) : {};
}
