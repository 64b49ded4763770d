/** `burrow http|tcp|tls|udp`: parse, connect, print, reconnect, Ctrl-C. */
import { Agent, type AgentOutput, type AgentTunnel } from "../agent/client.ts";
import { RemoteConfig } from "../agent/remote-config.ts";
import { TunnelSet } from "../agent/tunnel-set.ts";
import { AGENT_KINDS } from "../agent/kinds/index.ts";
import type { TunnelKind } from "../protocol/kinds.ts";
import { resolveCredentials, resolveProxy } from "../agent/settings/server-and-token.ts";
import * as v from "valibot";
import { TunnelRequest } from "../protocol/messages.ts";
import { MAX_PAYLOAD } from "../protocol/wire.ts";
import { parseFlags } from "../config/flags.ts";
import { CLI_KINDS } from "./kinds/index.ts";
import { helpText } from "./usage.ts";
import { UsageError } from "../usage-error.ts";
import { isCompiled } from "../version.ts";
import { COMMON } from "./agent-flags.ts";
import { parseTarget } from "../agent/settings/tunnel-options.ts";
import { tunnelFromFlags } from "./tunnel-flags.ts";
import { chooseOutput, openOutput } from "./agent-output/choose.ts";
import { announceInspector, inspectChoice, openInspector } from "./inspect-flags.ts";

/** --drain-timeout in ms (a pool member's leaving), or undefined where the command has no such flag. */
function drainTimeout(values: Record<string, unknown>): number | undefined {
  const text = values["drain-timeout"] as string | undefined;
  if (text === undefined) return undefined;
  const s = /^[0-9]{1,4}$/.test(text) ? Number(text) : NaN;
  if (!(s >= 0 && s <= 3600)) throw new UsageError(`--drain-timeout must be a whole number of seconds from 0 to 3600 (got '${text.slice(0, 40)}')`);
  return s * 1000;
}

/** What the agent connects with. `server` and `token` are the flags' (or a config file's) when given. */
export interface AgentSettings {
  server?: string;
  token?: string;
  proxy?: string;
  insecure?: boolean;
}

/** A flag of on|off, its table's default when not given. */
function onOff(values: Record<string, unknown>, flag: "remote-restart" | "remote-update"): boolean {
  const text = values[flag] === undefined ? COMMON[flag].default : String(values[flag]);
  if (text !== "on" && text !== "off") throw new UsageError(`--${flag} must be on or off (got '${text.slice(0, 40)}')`);
  return text === "on";
}

/** `burrow update` run beside the agent (the server's admin asked, and --remote-update is on): its last line. */
async function runBurrowUpdate(): Promise<{ ok: boolean; message: string }> {
  const command = isCompiled() ? [process.execPath, "update"] : [process.execPath, Bun.main, "update"];
  const proc = Bun.spawn(command, { stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  const last = `${out}\n${err}`.trim().split("\n").filter((l) => l.trim() !== "").at(-1) ?? `exit ${code}`;
  return { ok: code === 0, message: last.slice(0, 300) };
}

/** What a command adds to the agent it runs: burrow start's reload of its file, its --remote. */
export interface AgentHooks {
  /** burrow start --remote: the agent runs its token's tunnels kept on the server, beside these. */
  remote?: boolean;
  /** The agent runs: its tunnels by source (the agent API changes them too); returns what stops what the hook started. */
  started?(set: TunnelSet, out: AgentOutput): (() => void) | void;
}

/**
 * Runs the agent with these tunnels until Ctrl-C (exit 0) or a refusal it
 * cannot get past (exit 1). `values`: the parsed COMMON flags, shared by
 * burrow http, tcp and start.
 */
export async function runAgent(tunnels: AgentTunnel[], values: Record<string, unknown>, settings: AgentSettings = {}, hooks: AgentHooks = {}): Promise<number> {
  const drainTimeoutMs = drainTimeout(values);
  // which of the server's asks this agent takes: its own say
  const manage = { restart: onOff(values, "remote-restart"), update: onOff(values, "remote-update"), runUpdate: runBurrowUpdate };
  const logChoice = chooseOutput({ log: values.log as string | undefined, logLevel: values["log-level"] as string | undefined }, process.stdout);
  // server and token: flags, then the environment, then the config file, then burrow login's file
  const { server, token } = resolveCredentials(
    { server: values.server as string | undefined, token: values.token as string | undefined, tokenFile: values["token-file"] as string | undefined },
    process.env,
    { server: settings.server, token: settings.token },
  );
  const proxy = resolveProxy((values.proxy as string | undefined) ?? settings.proxy);
  checkHandshake(tunnels);
  const insecure = Boolean(values.insecure) || Boolean(settings.insecure);
  const inspecting = openInspector(inspectChoice(values));
  const printed = openOutput(logChoice, server);
  const inspector = announceInspector(inspecting, printed);
  const out = inspector ? inspector.watch(printed) : printed;
  const stop = () => agent.stop();
  let agent: Agent;
  let unhook: (() => void) | void = undefined;
  try {
    const remote = hooks.remote ? new RemoteConfig(out, () => agent.statusChanged(remote?.error)) : undefined;
    let set: TunnelSet | undefined;
    agent = new Agent({
      server,
      token,
      proxy,
      insecure,
      tunnels,
      out,
      inspector: inspector?.store,
      drainTimeoutMs,
      ...(remote ? { remote: { config: (c) => remote.received(c), state: () => ({ version: remote.version, ...(remote.error ? { error: remote.error } : {}) }) } } : {}),
      manage,
      sourceOf: (name) => set?.sourceOf(name),
    });
    // the tunnels by where they come from: the server's remote config, this command's, and the agent API's on the inspector's port
    set = new TunnelSet(agent, { source: "local", tunnels }, out);
    if (remote) remote.set = set;
    if (inspector) inspector.tunnels = set;
    unhook = hooks.started?.(set, out);
    process.once("SIGINT", stop);
    process.once("SIGTERM", stop);
    return await agent.run();
  } finally {
    unhook?.();
    process.off("SIGINT", stop);
    process.off("SIGTERM", stop);
    inspector?.stop();
    // the terminal back as it was (the screen), then a refusal where it stays in sight
    await printed.finish();
  }
}

/**
 * The HELLO carries every tunnel's settings in one frame: settings the
 * protocol does not take (a header value or password longer than it carries)
 * or too many bytes in all would otherwise be a refused handshake or a frame
 * that cannot be sent. Caught here, before anything connects, as a usage
 * error naming the tunnel; no value is quoted back (they may be secrets).
 */
export function checkHandshake(tunnels: AgentTunnel[]): void {
  for (const t of tunnels) {
    const parsed = v.safeParse(TunnelRequest, t.request);
    if (!parsed.success) {
      const issue = parsed.issues[0]!;
      throw new UsageError(`tunnel '${t.name}': ${v.getDotPath(issue) ?? "its settings"}: ${issue.message} (more than the protocol carries)`);
    }
  }
  const bytes = Buffer.byteLength(JSON.stringify(tunnels.map((t) => t.request)));
  if (bytes > HELLO_TUNNELS_MAX_BYTES) {
    throw new UsageError(
      `the tunnels' settings take ${Math.ceil(bytes / 1024)} KiB, more than one handshake carries (${HELLO_TUNNELS_MAX_BYTES / 1024} KiB): fewer or shorter access rules`,
    );
  }
}

/** A HELLO frame's payload is at most MAX_PAYLOAD; the token and its other fields take well under 4 KiB of it. */
const HELLO_TUNNELS_MAX_BYTES = MAX_PAYLOAD - 4096;

/** `burrow <kind>`: one tunnel of that kind, from its argument and flags (its unit in kinds/). */
export function kindCommand(kind: TunnelKind): (argv: string[]) => Promise<number> {
  const command = CLI_KINDS[kind];
  return async (argv) => {
    const { values, positionals } = parseFlags(argv, command.doc.flags);
    if (values.help) return void process.stdout.write(helpText(command.doc)), 0;
    if (positionals.length > 1) throw new UsageError(`unexpected argument '${positionals[1]}'`);
    const target = command.target ? command.target(positionals[0], values) : parseTarget(positionals[0], AGENT_KINDS[kind].urlTarget);
    return runAgent([{ name: kind, ...tunnelFromFlags(kind, values, target) }], values);
  };
}
