/**
 * `burrow diagnose --remote`: the tunnels the server keeps for this token
 * (its remote config), which `burrow start --remote` runs. The server's
 * check is asked for the config (POST /_burrow/check with `remote`: the
 * token proves it is that device's), the config is read by the agent's own
 * reader as a CONFIG is (a server newer than this agent may keep keys it
 * does not know), and its tunnels join the config file's as the agent's
 * set joins them (agent/tunnel-set.ts): the server's wins a name, the
 * file's of that name is set aside; past the tunnels one connection holds,
 * the rest would be refused. What is left is judged by the server's check
 * as the file's tunnels are (server-checks.ts).
 */
import * as v from "valibot";
import { AGENT_REFUSALS, REMOTE_UNSUPPORTED } from "../../agent/access.ts";
import { readTunnelsJson, TunnelsJsonError } from "../../agent/settings/tunnels-json.ts";
import { AgentCheck, AgentCheckAnswer } from "../../protocol/agent-check.ts";
import { CHECK_PATH, MAX_SESSION_TUNNELS, PROTOCOL_VERSION } from "../../protocol/wire.ts";
import { skipped, type CheckResult, type DiagnoseSettings } from "./checks.ts";
import { ms } from "./network-checks.ts";
import { exchange, type Server } from "./reach.ts";
import { parseJson } from "./server-checks.ts";

/** A config that does not read here: the agent would not take it (remote-config.ts). */
export const REMOTE_CONFIG_UNREADABLE = "REMOTE_CONFIG_UNREADABLE";

type Tunnels = DiagnoseSettings["tunnels"];

export interface RemoteTunnels {
  /** The `remote` check: the config kept, and read as the agent reads it. */
  result: CheckResult;
  /** The tunnels to judge, in the order the agent runs them: the server's, then the file's it does not set aside. */
  tunnels: Tunnels;
  /** Of those, the server's (their results say so). */
  fromServer: Set<string>;
  /** The file's tunnels set aside, and those past what one connection holds: told, not judged. */
  notJudged: CheckResult[];
}

/** Where to set the config, for the advice. */
const WHERE = "the panel (a token's Tunnels), the portal (Devices) or PUT /api/tokens/ID/config";

export async function remoteTunnels(s: Server, settings: DiagnoseSettings, open: () => Promise<import("node:net").Socket>): Promise<RemoteTunnels> {
  const fileOnly = (result: CheckResult): RemoteTunnels => ({ result, ...joined([], settings.tunnels) });
  const started = performance.now();
  const body: v.InferInput<typeof AgentCheck> = { version: PROTOCOL_VERSION, token: settings.token, proxy: settings.proxy !== undefined, tunnels: [], remote: true };
  let json: Record<string, unknown> | undefined;
  let status: number;
  try {
    const answer = await exchange(await open(), { method: "POST", path: CHECK_PATH, host: s.url.host, body: JSON.stringify(body) }, settings.timeoutMs);
    status = answer.status;
    json = parseJson(answer);
  } catch (err) {
    return fileOnly(skipped("remote", `no answer to the check (POST ${CHECK_PATH}): ${(err as Error).message}`));
  }
  // the protocol and token checks say why (they ask the same question)
  if (status !== 200) return fileOnly(skipped("remote", "needs the server's check to take this agent and its token (see protocol and token)"));
  const parsed = v.safeParse(AgentCheckAnswer, json);
  if (!parsed.success) return fileOnly(skipped("remote", "the server's answer to the check could not be read (see protocol)"));
  const config = parsed.output.remote_config;
  const took = ms(started);
  if (!config) {
    return fileOnly({
      id: "remote",
      status: "fail",
      code: REMOTE_UNSUPPORTED,
      detail: "the server keeps no devices' tunnels: it is older than remote configs (burrow start --remote stops with REMOTE_UNSUPPORTED)",
      advice: AGENT_REFUSALS.REMOTE_UNSUPPORTED.advice,
      ms: took,
    });
  }
  let remote: Tunnels;
  try {
    remote = readTunnelsJson({ tunnels: config.tunnels }).map((t) => ({ name: t.name, request: t.request }));
  } catch (err) {
    if (!(err instanceof TunnelsJsonError)) throw err;
    return fileOnly({
      id: "remote",
      status: "fail",
      code: REMOTE_CONFIG_UNREADABLE,
      detail: `the server's config for this token (version ${config.version}) does not read here: ${err.message}; the agent would not take it, and would keep running what it runs`,
      advice: `Update burrow on this machine (a newer server may keep settings this agent does not know), or correct the config on the server: ${WHERE}.`,
      ms: took,
    });
  }
  const names = remote.map((t) => t.name);
  const result: CheckResult =
    config.version === 0
      ? { id: "remote", status: "warn", detail: "the server keeps no tunnels for this token (none was ever set): burrow start --remote runs none until some are", advice: `Set the device's tunnels: ${WHERE}.`, ms: took }
      : { id: "remote", status: "pass", detail: `the server keeps version ${config.version} for this token: ${names.length === 0 ? "no tunnel" : `${names.length} tunnel${names.length === 1 ? "" : "s"} (${names.join(", ")})`}`, ms: took };
  return { result, ...joined(remote, settings.tunnels) };
}

/** The server's tunnels and the file's, one per name, the server's winning, as many as one connection holds. */
function joined(remote: Tunnels, file: Tunnels): Omit<RemoteTunnels, "result"> {
  const fromServer = new Set(remote.map((t) => t.name));
  const notJudged: CheckResult[] = [];
  const kept: Tunnels = [...remote];
  for (const t of file) {
    if (fromServer.has(t.name)) notJudged.push({ id: "tunnel", tunnel: t.name, status: "skip", detail: "set aside: the server's config has a tunnel of this name, and the server's wins (burrow start --remote runs the server's)" });
    else kept.push(t);
  }
  for (const t of kept.slice(MAX_SESSION_TUNNELS)) {
    notJudged.push({
      id: "tunnel",
      tunnel: t.name,
      status: "fail",
      code: "TUNNEL_LIMIT",
      detail: `one connection holds at most ${MAX_SESSION_TUNNELS} tunnels: the server's and the file's together are ${kept.length}, and this one would be refused`,
      advice: "Run fewer tunnels on this device: take some out of the server's config or the file, or run them on another agent.",
    });
  }
  return { tunnels: kept.slice(0, MAX_SESSION_TUNNELS), fromServer, notJudged };
}
