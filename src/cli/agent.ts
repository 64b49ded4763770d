/** `burrow http` and `burrow tcp`: parse, connect, print, reconnect, Ctrl-C. */
import { Agent, type AgentOutput } from "../agent/client.ts";
import type { LocalTarget } from "../agent/http.ts";
import { resolveCredentials, resolveProxy } from "../config/agent.ts";
import type { TunnelRequest } from "../protocol/messages.ts";
import { parseFlags, type FlagSpec } from "../config/flags.ts";
import { HTTP_HELP, TCP_HELP } from "./help.ts";
import { UsageError } from "../config/usage.ts";
import { paintFor } from "./colours.ts";

const COMMON: Record<string, FlagSpec> = {
  server: { type: "string" },
  token: { type: "string" },
  proxy: { type: "string" },
  insecure: { type: "boolean" },
};

const HTTP_FLAGS: Record<string, FlagSpec> = {
  ...COMMON,
  subdomain: { type: "string" },
  "skip-warning": { type: "boolean" },
  "host-header": { type: "string" },
  "response-timeout": { type: "string" },
};

const TCP_FLAGS: Record<string, FlagSpec> = { ...COMMON, "remote-port": { type: "string" } };

/** "3000", "localhost:3000", "[::1]:3000", "http://host:3000" -> where the local service is. */
export function parseTarget(raw: string | undefined, allowScheme: boolean): LocalTarget {
  if (raw === undefined) throw new UsageError("missing the local port, e.g. 3000 or localhost:3000");
  let rest = raw;
  let tls = false;
  const scheme = /^([a-z]+):\/\//i.exec(raw);
  if (scheme) {
    if (!allowScheme || !["http", "https"].includes(scheme[1]!.toLowerCase())) throw new UsageError(`'${raw}' is not PORT or HOST:PORT`);
    tls = scheme[1]!.toLowerCase() === "https";
    rest = raw.slice(scheme[0].length).replace(/\/.*$/, "");
  }
  const m = /^(?:(\[[0-9a-f:.]+\]|[a-z0-9.-]+):)?([0-9]{1,5})$/i.exec(rest);
  const port = m ? Number(m[2]) : NaN;
  if (!m || port < 1 || port > 65535) throw new UsageError(`'${raw}' is not PORT or HOST:PORT (port 1-65535)`);
  const host = m[1] ? m[1].replace(/^\[|\]$/g, "") : "localhost";
  return { host, port, tls };
}

/**
 * stdout for the agent's lines. A busy tunnel logs thousands of requests a
 * second: lines written in one turn of the event loop go out in one write at
 * its end, rather than a console.log (and a system call) each.
 */
let pending: string[] = [];
function print(line: string): void {
  if (pending.length === 0) setImmediate(flushLines);
  pending.push(line);
}
function flushLines(): void {
  const text = pending.join("\n") + "\n";
  pending = [];
  process.stdout.write(text);
}

let stampSecond = 0;
let stampText = "";
/** HH:MM:SS local time, formatted once a second (a busy tunnel prints many lines a second). */
function timestamp(): string {
  const second = Math.floor(Date.now() / 1000);
  if (second !== stampSecond) {
    stampSecond = second;
    stampText = new Date().toTimeString().slice(0, 8);
  }
  return stampText;
}

function consoleOutput(target: LocalTarget): AgentOutput {
  const local = `${target.tls ? "https://" : ""}${target.host}:${target.port}`;
  const out = paintFor(process.stdout);
  const err = paintFor(process.stderr);
  return {
    ready(r) {
      for (const t of r.tunnels) print(`${out.green("Forwarding")}  ${out.bold(t.url)} -> ${local}   ${out.dim(`(user ${r.username})`)}`);
      print(out.dim("Press Ctrl-C to stop."));
    },
    request(l) {
      print(`${out.dim(timestamp())}  ${l.method.padEnd(7)} ${l.path}  ${out.status(l.status)}  ${Math.round(l.ms)} ms`);
    },
    connection(l) {
      if (l.event === "open") print(`${timestamp()}  connection from ${l.remote}`);
      else print(`${timestamp()}  closed ${l.remote}  in ${l.bytesIn ?? 0} B, out ${l.bytesOut ?? 0} B`);
    },
    reconnecting(why, inMs, attempt) {
      print(`${out.dim(timestamp())}  ${out.yellow(`${why}; reconnecting in ${(inMs / 1000).toFixed(1)} s`)} (attempt ${attempt})`);
    },
    notice(message) {
      print(`${timestamp()}  ${message}`);
    },
    refused(code, message) {
      if (pending.length > 0) flushLines(); // what came before the refusal reads before it
      console.error(`burrow: ${err.red(`refused by the server: ${code}`)}: ${message}`);
    },
  };
}

async function runAgent(tunnel: TunnelRequest, target: LocalTarget, values: Record<string, unknown>): Promise<number> {
  const { server, token } = resolveCredentials({ server: values.server as string, token: values.token as string });
  const proxy = resolveProxy(values.proxy as string | undefined);
  const agent = new Agent({ server, token, tunnel, target, proxy, insecure: Boolean(values.insecure), out: consoleOutput(target) });
  const stop = () => agent.stop();
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
  const code = await agent.run();
  process.off("SIGINT", stop);
  process.off("SIGTERM", stop);
  return code;
}

export async function httpCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, HTTP_FLAGS);
  if (values.help) return void process.stdout.write(HTTP_HELP), 0;
  if (positionals.length > 1) throw new UsageError(`unexpected argument '${positionals[1]}'`);
  const target = parseTarget(positionals[0], true);
  const hostHeader = values["host-header"] as string | undefined;
  if (hostHeader !== undefined && hostHeader.trim() === "") throw new UsageError("--host-header needs 'rewrite' or a host name");
  target.hostHeader = hostHeader;
  const subdomain = values.subdomain as string | undefined;
  const tunnel: TunnelRequest = { protocol: "http", subdomain, skipWarning: Boolean(values["skip-warning"]) };
  const timeout = values["response-timeout"] as string | undefined;
  if (timeout !== undefined) {
    const seconds = /^[0-9]{1,5}(\.[0-9]+)?$/.test(timeout) ? Number(timeout) : Number.NaN;
    if (!(seconds >= 0.1 && seconds <= 86_400)) throw new UsageError(`--response-timeout must be a number of seconds from 0.1 to 86400 (got '${timeout}')`);
    tunnel.responseTimeout = seconds;
  }
  return runAgent(tunnel, target, values);
}

export async function tcpCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, TCP_FLAGS);
  if (values.help) return void process.stdout.write(TCP_HELP), 0;
  if (positionals.length > 1) throw new UsageError(`unexpected argument '${positionals[1]}'`);
  const target = parseTarget(positionals[0], false);
  const raw = values["remote-port"] as string | undefined;
  let port: number | undefined;
  if (raw !== undefined) {
    port = Number(raw);
    if (!/^[0-9]{1,5}$/.test(raw) || port < 1 || port > 65535) throw new UsageError(`--remote-port must be a port number from 1 to 65535 (got '${raw}')`);
  }
  return runAgent({ protocol: "tcp", port }, target, values);
}
