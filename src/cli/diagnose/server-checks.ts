/**
 * What the server itself says: the time on its answer to the agents'
 * question (GET /_burrow/connect, which also names its direct port), and
 * its judgement of this agent (POST /_burrow/check: protocol version,
 * token and user, each tunnel of the config file), as a HELLO would get it.
 */
import * as v from "valibot";
import { TUNNEL_REFUSALS } from "../../core/errors.ts";
import { AgentCheck, AgentCheckAnswer } from "../../protocol/agent-check.ts";
import { DirectPortAnswer } from "../../protocol/messages.ts";
import { CHECK_PATH, CONNECT_PATH, PROTOCOL_VERSION, WIRE_ERRORS } from "../../protocol/wire.ts";
import { VERSION } from "../../version.ts";
import { skipped, type CheckResult, type DiagnoseSettings } from "./checks.ts";
import { ms } from "./network-checks.ts";
import { exchange, type Answer, type Server } from "./reach.ts";

/** The Host the server is asked with: its URL's, the port said only when it is not the scheme's. */
const hostHeader = (s: Server) => s.url.host;

/** What the agents' question told: its answer (or why none came), for the clock and direct port checks. */
export interface AgentsQuestion {
  answer?: Answer;
  why?: string;
  directPort?: number | null;
}

export async function askAgentsPath(s: Server, open: () => Promise<import("node:net").Socket>, timeoutMs: number): Promise<AgentsQuestion> {
  try {
    const answer = await exchange(await open(), { method: "GET", path: CONNECT_PATH, host: hostHeader(s) }, timeoutMs);
    let directPort: number | null | undefined;
    if (answer.status === 200) {
      try {
        const parsed = v.safeParse(DirectPortAnswer, JSON.parse(answer.body));
        if (parsed.success) directPort = parsed.output.direct_port;
      } catch {
        // not JSON: an older edge, or something else answering
      }
    }
    return { answer, directPort };
  } catch (err) {
    return { why: (err as Error).message };
  }
}

/** This machine's clock against the Date of the server's answer (which has whole seconds: a second either way is noise). */
export function checkClock(q: AgentsQuestion, toleranceS: number): CheckResult {
  if (!q.answer) return { id: "clock", status: "fail", detail: `no answer to GET ${CONNECT_PATH}: ${q.why}`, advice: "See the checks above: the server does not answer HTTP on this URL." };
  const date = q.answer.headers.get("date");
  const server = date ? Date.parse(date) : NaN;
  if (!Number.isFinite(server)) return { id: "clock", status: "skip", detail: "the server's answer has no Date to compare with" };
  // the server wrote its Date between sending and answering: the middle, give or take half the round trip
  const here = (q.answer.sentAt + q.answer.headAt) / 2;
  const offS = Math.round((here - server) / 1000);
  const rtt = q.answer.headAt - q.answer.sentAt;
  const words = Math.abs(offS) <= 1 ? "agrees with the server's (within a second)" : `is ${Math.abs(offS)} s ${offS > 0 ? "ahead of" : "behind"} the server's`;
  const detail = `this machine's clock ${words} (its Date: ${date}; round trip ${rtt} ms)`;
  if (Math.abs(offS) <= toleranceS) return { id: "clock", status: "pass", detail };
  return {
    id: "clock",
    status: "fail",
    detail,
    code: "CLOCK_SKEW",
    advice: `More than ${toleranceS} s apart (--clock-tolerance): certificates look expired or not yet valid, and this machine's log times do not match the server's. Set the clock right, here or on the server (NTP: timedatectl set-ntp true).`,
  };
}

/** Protocol, token and tunnels: one question to the server, three checks (and one per tunnel). */
export async function checkWithServer(s: Server, settings: DiagnoseSettings, open: () => Promise<import("node:net").Socket>): Promise<CheckResult[]> {
  const tunnelsSkipped = (why: string) => settings.tunnels.map((t) => skipped("tunnel", why, t.name));
  const started = performance.now();
  const body: v.InferInput<typeof AgentCheck> = { version: PROTOCOL_VERSION, token: settings.token, proxy: settings.proxy !== undefined, tunnels: settings.tunnels.map((t) => t.request) };
  let answer: Answer;
  try {
    answer = await exchange(await open(), { method: "POST", path: CHECK_PATH, host: hostHeader(s), body: JSON.stringify(body) }, settings.timeoutMs);
  } catch (err) {
    const detail = `no answer to the check (POST ${CHECK_PATH}): ${(err as Error).message}`;
    return [{ id: "protocol", status: "fail", detail, advice: "See the checks above: the server does not answer HTTP on this URL.", ms: ms(started) }, skipped("token", "needs the server's answer"), ...tunnelsSkipped("needs the server's answer")];
  }
  const took = ms(started);
  const json = parseJson(answer);
  const code = json && typeof json.code === "string" ? json.code : undefined;
  const message = json && typeof json.error === "string" ? json.error : undefined;

  if (answer.status === 409 && code === "VERSION_MISMATCH") {
    return [{ id: "protocol", status: "fail", code, detail: message ?? "the protocol versions differ", advice: WIRE_ERRORS.VERSION_MISMATCH.advice, ms: took }, skipped("token", "needs a protocol both speak"), ...tunnelsSkipped("needs a protocol both speak")];
  }
  if (answer.status !== 200 && code === undefined) {
    // no check here: an older burrow (or not burrow) answered; the handshake will say what it thinks
    const why = `the server has no agent check (${answer.status} ${answer.reason} to POST ${CHECK_PATH}): an older burrow, or something else in front of it`;
    return [
      { id: "protocol", status: "warn", detail: `${why}; its version is unknown`, advice: "Run the same burrow version on both ends (burrow update); the agent's handshake says VERSION_MISMATCH if they cannot talk.", ms: took },
      skipped("token", "the server has no agent check: the agent's handshake is the test"),
      ...tunnelsSkipped("the server has no agent check"),
    ];
  }
  const protocol: CheckResult = { id: "protocol", status: "pass", detail: `the server speaks protocol ${PROTOCOL_VERSION}, as this agent does`, ms: took };
  if (answer.status !== 200) {
    const advice = code && code in TUNNEL_REFUSALS ? TUNNEL_REFUSALS[code as keyof typeof TUNNEL_REFUSALS].advice : "See the server's log for why.";
    const retry = answer.headers.get("retry-after");
    return [protocol, { id: "token", status: "fail", code, detail: `the server refuses this token: ${code}: ${message ?? answer.reason}${retry ? ` (try again in ${retry} s)` : ""}`, advice }, ...tunnelsSkipped("needs a token the server takes")];
  }
  const parsed = v.safeParse(AgentCheckAnswer, json);
  if (!parsed.success) return [{ ...protocol, status: "warn", detail: "the server's answer to the check is not one this agent reads: a newer or older burrow", advice: "Run the same burrow version on both ends (burrow update)." }, skipped("token", "the answer could not be read"), ...tunnelsSkipped("the answer could not be read")];
  const a = parsed.output;
  protocol.detail = `the server runs burrow ${a.server_version} and speaks protocol ${a.protocol_version}, as this agent (burrow ${VERSION}) does`;
  if (a.server_version !== VERSION) protocol.detail += "; the versions differ, which works, but the same version on both ends is best";
  return [protocol, tokenResult(a), ...tunnelResults(a, settings)];
}

/** The answer's body as a JSON object, or undefined when it is none. */
export function parseJson(answer: Answer): Record<string, unknown> | undefined {
  if (!(answer.headers.get("content-type") ?? "").includes("json")) return undefined;
  try {
    const value: unknown = JSON.parse(answer.body);
    return value && typeof value === "object" && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** "3 of 5", or "3 (no limit)" for a limit of 0. */
const ofLimit = (used: number, limit: number) => (limit > 0 ? `${used} of ${limit}` : `${used} (no limit)`);

function tokenResult(a: AgentCheckAnswer): CheckResult {
  const u = a.user;
  const traffic = u.traffic_limit > 0 ? `${u.traffic_used} of ${u.traffic_limit} bytes this ${u.traffic_period} period` : `${u.traffic_used} bytes this ${u.traffic_period} period (no limit)`;
  const limits = `tunnels open ${ofLimit(u.tunnels_open, u.max_tunnels)}, devices connected ${ofLimit(u.devices_connected, u.max_devices)}, protocols ${u.allowed_protocols}, traffic ${traffic}${u.can_use_proxy ? "" : ", no proxy allowed"}${u.require_auth ? ", every tunnel must require sign-in" : ""}`;
  const detail = `token ${a.token.id} ('${a.token.device_name}') of user '${u.username}': ${limits}`;
  if (a.refusal) {
    const advice = a.refusal.code in TUNNEL_REFUSALS ? TUNNEL_REFUSALS[a.refusal.code as keyof typeof TUNNEL_REFUSALS].advice : undefined;
    return { id: "token", status: "fail", code: a.refusal.code, detail: `${detail}; but the server refuses this agent: ${a.refusal.code}: ${a.refusal.message}`, ...(advice ? { advice } : {}) };
  }
  return { id: "token", status: "pass", detail };
}

function tunnelResults(a: AgentCheckAnswer, settings: DiagnoseSettings): CheckResult[] {
  if (a.refusal) return settings.tunnels.map((t) => skipped("tunnel", `the server refuses every tunnel of this agent (${a.refusal!.code})`, t.name));
  return settings.tunnels.map((t, index): CheckResult => {
    const got = a.tunnels.find((x) => x.index === index);
    if (!got) return { id: "tunnel", tunnel: t.name, status: "warn", detail: "the server did not judge it" };
    if (!got.ok) {
      const advice = got.code && got.code in TUNNEL_REFUSALS ? TUNNEL_REFUSALS[got.code as keyof typeof TUNNEL_REFUSALS].advice : undefined;
      return { id: "tunnel", tunnel: t.name, status: "fail", code: got.code, detail: `${t.request.protocol}: refused: ${got.code}: ${got.message}`, ...(advice ? { advice } : {}) };
    }
    const where = got.subdomain ?? got.hostname ?? (got.port !== undefined ? `port ${got.port}` : undefined);
    const what = where ? `${where} is free for it${got.held_by_this_token ? " (held now by an agent of this token, which it would take over)" : ""}` : "a name or port is free for it";
    return { id: "tunnel", tunnel: t.name, status: "pass", detail: `${t.request.protocol}: ${what}` };
  });
}
