/**
 * `burrow connect owner/name`: reaches a private tunnel shared with you
 * (`burrow tcp 5432 --private --name db --share you` on its owner's side)
 * through a local port on this machine. Waits while the owner's agent is
 * away, and reconnects as any agent does.
 */
import { Agent } from "../agent/client.ts";
import { openConnectorPort, type ConnectorPort } from "../agent/connector.ts";
import { CONNECTOR_FLOW_IDLE_MS, CONNECTOR_MAX_FLOWS } from "../agent/connector-udp.ts";
import type { AgentOutput } from "../agent/output.ts";
import { resolveCredentials, resolveProxy } from "../agent/settings/server-and-token.ts";
import { parseFlags, type FlagTable } from "../config/flags.ts";
import { KIND_UNITS } from "../protocol/kinds.ts";
import { UsageError } from "../usage-error.ts";
import { PRIVATE_NAME_PATTERN } from "../validate/fields.ts";
import { COMMON } from "./agent-flags.ts";
import { helpText, type CommandDoc } from "./usage.ts";

const { server, token, "token-file": tokenFile, proxy, insecure } = COMMON;

export const CONNECT_FLAGS = {
  server,
  token,
  "token-file": tokenFile,
  proxy,
  insecure,
  port: {
    type: "string",
    arg: "N",
    defaultText: "the owner's port when it is free here, else any",
    help: "the local port to listen on",
  },
  bind: {
    type: "string",
    arg: "ADDR",
    default: "127.0.0.1",
    help: "the local address to listen on (another than loopback lets other machines in)",
  },
  "udp-idle": {
    type: "string",
    arg: "S",
    default: String(CONNECTOR_FLOW_IDLE_MS / 1000),
    help: "a udp tunnel: a local sender's flow with no datagram either way for this long ends (1-86400 s)",
  },
  "udp-flows": {
    type: "string",
    arg: "N",
    default: String(CONNECTOR_MAX_FLOWS),
    help: "a udp tunnel: flows at once; past it the least recently active ends (1-65536)",
  },
} as const satisfies FlagTable;

/** A whole number from `min` to `max` given to `flag`, or a UsageError. */
function whole(flag: string, raw: string, min: number, max: number): number {
  const n = /^[0-9]{1,6}$/.test(raw) ? Number(raw) : NaN;
  if (!(n >= min && n <= max)) throw new UsageError(`--${flag} must be a whole number from ${min} to ${max} (got '${raw}')`);
  return n;
}

export const CONNECT_DOC: CommandDoc = {
  name: "connect",
  usage: ["burrow connect OWNER/NAME [--port N] [--bind ADDR]"],
  about: `Reaches a private tunnel shared with you (its owner ran burrow tcp|http|udp ...
--private --name NAME --share you) through a local port: connect your client
(psql, ssh, a browser) to the address printed. An http tunnel's service sees
your username in X-Burrow-User; a udp tunnel's port here is a UDP port.
Waits while the owner's agent is away.`,
  flags: CONNECT_FLAGS,
};

export async function connectCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, CONNECT_FLAGS);
  if (values.help) {
    process.stdout.write(helpText(CONNECT_DOC));
    return 0;
  }
  if (positionals.length !== 1) throw new UsageError(positionals.length === 0 ? "burrow connect needs OWNER/NAME, e.g. alice/db" : `unexpected argument '${positionals[1]}'`);
  const target = positionals[0]!;
  const [owner, name, extra] = target.split("/");
  if (!owner || !name || extra !== undefined || !PRIVATE_NAME_PATTERN.test(name.toLowerCase())) throw new UsageError(`'${target}' is not OWNER/NAME, e.g. alice/db`);
  const rawPort = values.port as string | undefined;
  if (rawPort !== undefined && !/^[0-9]{1,5}$/.test(rawPort)) throw new UsageError("--port must be a port number, 0 to 65535");
  const port = rawPort === undefined ? undefined : Number(rawPort);
  if (port !== undefined && port > 65535) throw new UsageError("--port must be a port number, 0 to 65535");
  const bind = (values.bind as string | undefined) ?? "127.0.0.1";
  const idleMs = whole("udp-idle", (values["udp-idle"] as string | undefined) ?? String(CONNECTOR_FLOW_IDLE_MS / 1000), 1, 86_400) * 1000;
  const maxFlows = whole("udp-flows", (values["udp-flows"] as string | undefined) ?? String(CONNECTOR_MAX_FLOWS), 1, 65_536);
  const creds = resolveCredentials(
    { server: values.server as string | undefined, token: values.token as string | undefined, tokenFile: values["token-file"] as string | undefined },
    process.env,
    {},
  );
  let local: ConnectorPort | undefined;
  let opening = false;
  let finished = false;
  const say = (line: string) => console.log(line);
  const out: AgentOutput = {
    ready() {},
    request() {},
    connection() {},
    reconnecting: (why, inMs) => (why === "TUNNEL_OFFLINE" ? undefined : say(`connection to the server lost (${why}); trying again in ${Math.round(inMs / 1000)} s`)),
    refused: (code, message) => (code === "TUNNEL_OFFLINE" ? say(`${target} is offline: waiting for it to come back`) : console.error(`burrow: refused: ${code}: ${message}`)),
    notice: (message) => say(message),
  };
  const agent: Agent = new Agent({
    server: creds.server,
    token: creds.token,
    proxy: resolveProxy(values.proxy as string | undefined),
    insecure: Boolean(values.insecure),
    tunnels: [],
    out,
    connect: {
      target,
      ready(c) {
        const connected = (l: ConnectorPort) => {
          // what to do with the local port, in the kind's words: "open http://...", "connect to ...", "send to udp://..."
          const shown = KIND_UNITS[c.protocol].display;
          say(`Connected to ${c.target} (${c.protocol}): ${shown.connectVerb} ${shown.address({ host: bind.includes(":") ? `[${bind}]` : bind, port: l.port })}`);
        };
        if (local) return connected(local);
        if (opening) return;
        opening = true;
        // a port that comes after the agent stopped is closed at once, not left listening
        const listening = (l: ConnectorPort) => (finished ? l.stop() : connected((local = l)));
        const cannot = (err: unknown) => {
          console.error(`burrow: cannot listen on ${bind}:${port ?? c.localPort ?? 0}: ${(err as Error).message}`);
          agent.stop();
        };
        openConnectorPort(c, {
          host: bind,
          port,
          idleMs,
          maxFlows,
          open: (remote, kind) => agent.openConnectStream(remote, kind),
          events: { connection: (e) => (e.opened ? undefined : say(`a connection from ${e.remote} was closed: not connected to ${target} now`)) },
        }).then(listening, cannot);
      },
    },
  });
  const stop = () => agent.stop();
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
  try {
    return await agent.run();
  } finally {
    finished = true;
    process.off("SIGINT", stop);
    process.off("SIGTERM", stop);
    local?.stop();
  }
}
