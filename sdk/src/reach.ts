/**
 * reach("alice/db"): `burrow connect` in code. An agent with no tunnels of
 * its own holds the connection to the server (and reconnects as any agent
 * does); once the server says the private tunnel is there, a local port
 * (src/agent/connector.ts, or connector-udp.ts for a udp tunnel) carries
 * each local connection, or each local sender's datagrams, to it.
 */
import { EventEmitter } from "node:events";
import { Agent } from "../../src/agent/client.ts";
import { CONNECTOR_FLOW_IDLE_MS, CONNECTOR_MAX_FLOWS } from "../../src/agent/connector-udp.ts";
import { openConnectorPort, type ConnectorPort } from "../../src/agent/connector.ts";
import type { AgentOutput } from "../../src/agent/output.ts";
import type { PrivateKind } from "../../src/protocol/kinds.ts";
import { PRIVATE_NAME_PATTERN } from "../../src/validate/fields.ts";
import type { ReachedEvents, ReachOptions } from "../index.d.ts";
import { credentials } from "./credentials.ts";
import { BurrowError } from "./errors.ts";

export class Reached extends EventEmitter<ReachedEvents> {
  protocol: PrivateKind = "tcp";
  host = "";
  port = 0;
  url?: string;

  /** @internal */
  constructor(
    readonly target: string,
    private readonly closer: () => Promise<void>,
  ) {
    super();
  }

  close(): Promise<void> {
    return this.closer();
  }
}

/** A whole number option from `min` to `max`, or a TypeError naming it. */
function whole(option: string, value: unknown, min: number, max: number): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max) throw new TypeError(`${option} must be a whole number from ${min} to ${max} (got ${String(value)})`);
  return value;
}

export function reach(target: string, options: ReachOptions = {}): Promise<Reached> {
  try {
    return open(target, options);
  } catch (err) {
    return Promise.reject(err);
  }
}

function open(target: string, options: ReachOptions): Promise<Reached> {
  if (typeof target !== "string") throw new TypeError('reach() needs "OWNER/NAME", e.g. "alice/db"');
  const [owner, name, extra] = target.split("/");
  if (!owner || !name || extra !== undefined || !PRIVATE_NAME_PATTERN.test(name.toLowerCase())) throw new TypeError(`'${target}' is not OWNER/NAME, e.g. alice/db`);
  const port = options.port === undefined ? undefined : whole("port", options.port, 0, 65535);
  const host = options.host ?? "127.0.0.1";
  if (typeof host !== "string" || host === "") throw new TypeError("host must be an address to listen on, e.g. 127.0.0.1");
  const idleMs = whole("udpIdle", options.udpIdle ?? CONNECTOR_FLOW_IDLE_MS / 1000, 1, 86_400) * 1000;
  const maxFlows = whole("udpFlows", options.udpFlows ?? CONNECTOR_MAX_FLOWS, 1, 65_536);
  const creds = credentials(options);

  let local: ConnectorPort | undefined;
  let opening = false;
  let finished = false;
  let settled = false;
  let down = false;
  let refusal: BurrowError | undefined;
  let agent: Agent;
  const reached = new Reached(target, async () => {
    agent.stop();
    await done;
  });

  let resolveReach!: (r: Reached) => void;
  let rejectReach!: (err: unknown) => void;
  const reaching = new Promise<Reached>((resolve, reject) => {
    resolveReach = resolve;
    rejectReach = reject;
  });

  const out: AgentOutput = {
    ready() {},
    request() {},
    connection() {},
    reconnecting: (why, inMs, attempt) => {
      // a server that cannot be reached before anything was: the caller hears of it, and it stops
      if (!settled && why !== "TUNNEL_OFFLINE" && !opening) {
        refusal = new BurrowError("UNREACHABLE", why);
        agent.stop();
        return;
      }
      down = true;
      reached.emit("reconnecting", { why, inMs, attempt });
    },
    restarting: () => {
      down = true;
      reached.emit("reconnecting", { why: "the server is restarting", inMs: 0, attempt: 0 });
    },
    // TUNNEL_OFFLINE is waited out (reconnecting says so); any other refusal ends it
    refused: (code, message) => void (code === "TUNNEL_OFFLINE" ? undefined : (refusal = new BurrowError(code, message))),
    notice() {},
  };

  const listening = (l: ConnectorPort) => {
    if (finished) return l.stop(); // it came after close()
    local = l;
    reached.host = l.host;
    reached.port = l.port;
    if (reached.protocol === "http") reached.url = `http://${l.host.includes(":") ? `[${l.host}]` : l.host}:${l.port}`;
    settled = true;
    resolveReach(reached);
  };
  const cannotListen = (err: unknown) => {
    refusal = new BurrowError("LISTEN_FAILED", `cannot listen on ${host}:${port ?? 0}: ${(err as Error).message}`);
    agent.stop();
  };

  agent = new Agent({
    server: creds.server,
    token: creds.token,
    insecure: creds.insecure,
    ...(creds.proxy ? { proxy: creds.proxy } : {}),
    tunnels: [],
    out,
    connect: {
      target,
      ready(c) {
        reached.protocol = c.protocol;
        if (down) {
          down = false;
          reached.emit("online");
        }
        if (local || opening) return;
        opening = true;
        openConnectorPort(c, {
          host,
          port,
          idleMs,
          maxFlows,
          open: (remote, kind) => agent.openConnectStream(remote, kind),
          events: { connection: (e) => void (e.closed ? undefined : reached.emit("connection", { remote: e.remote, opened: e.opened })) },
        }).then(listening, cannotListen);
      },
    },
  });

  const onAbort = () => agent.stop();
  options.signal?.addEventListener("abort", onAbort, { once: true });
  if (options.signal?.aborted) agent.stop();

  const done: Promise<void> = agent.run().then(
    (code) => {
      finished = true;
      options.signal?.removeEventListener("abort", onAbort);
      local?.stop();
      if (!settled) rejectReach(refusal ?? new BurrowError("CLOSED", "closed before the private tunnel was reached"));
      else reached.emit("closed", code === 0 || !refusal ? {} : { code: refusal.code, message: refusal.message });
    },
    (err) => {
      finished = true;
      local?.stop();
      if (!settled) rejectReach(new BurrowError("FAILED", String(err)));
      else reached.emit("closed", { code: "FAILED", message: String(err) });
    },
  );
  return reaching;
}
