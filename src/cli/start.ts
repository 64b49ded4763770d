/**
 * `burrow start [NAME...] | --all`: the tunnels of burrow.yml, over one
 * connection. `burrow config check`: the same file checked, nothing more.
 */
import { localAuthority } from "../agent/local-target.ts";
import type { AgentTunnel } from "../agent/client.ts";
import { parseFlags } from "../config/flags.ts";
import { configFileCandidates, findConfigFile, readTunnelsFile, type TunnelsFile } from "../agent/settings/tunnels-file.ts";
import { isPortKind } from "../protocol/kinds.ts";
import { UsageError } from "../usage-error.ts";
import { describeAccess } from "./access-flags.ts";
import { checkHandshake, runAgent } from "./agent.ts";
import { followTunnelsFile } from "./start-reload.ts";
import { CONFIG_DOC, CONFIG_FLAGS, START_DOC, START_FLAGS } from "./agent-flags.ts";
import { checkTunnelPolicy, describePolicy } from "./tunnel-policy.ts";
import { helpText } from "./usage.ts";

/** The config file: --config / BURROW_CONFIG, ./burrow.yml, then the config directory's. */
function loadFile(flag: string | undefined): TunnelsFile {
  const path = findConfigFile(flag);
  if (!path) throw new UsageError(`no config file: looked for ${configFileCandidates().join(" and ")} (or pass --config FILE)`);
  const file = readTunnelsFile(path);
  // each tunnel's own traffic policy, loaded as the edge will: a mistake is told before anything connects
  for (const t of file.tunnels) {
    const policy = "policy" in t.request ? t.request.policy : undefined;
    if (policy !== undefined) checkTunnelPolicy(policy, t.policyFrom ?? path, t.request.protocol === "http", t.name);
  }
  return file;
}

export async function startCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, START_FLAGS);
  if (values.help) return void process.stdout.write(helpText(START_DOC)), 0;
  const remote = Boolean(values.remote);
  // --remote reads a file only when one is named: the server's tunnels are the device's, a file's are added beside them
  const named = values.config as string | undefined;
  if (remote && named === undefined) {
    if (values.all || positionals.length > 0) throw new UsageError("with --remote, tunnels of a file are started only from a file --config names (or BURROW_CONFIG)");
    return runAgent([], values, {}, { remote: true });
  }
  const file = loadFile(named);
  const names = file.tunnels.map((t) => t.name);
  if (values.all && positionals.length > 0) throw new UsageError("name tunnels or pass --all, not both");
  if (!values.all && positionals.length === 0) throw new UsageError(`name the tunnels to start, or --all (in ${file.path}: ${names.join(", ")})`);
  const wanted = values.all ? names : [...new Set(positionals)];
  const unknown = wanted.filter((n) => !names.includes(n));
  if (unknown.length > 0) throw new UsageError(`no tunnel named ${unknown.map((n) => `'${n}'`).join(", ")} in ${file.path} (it has: ${names.join(", ")})`);
  const tunnels: AgentTunnel[] = file.tunnels.filter((t) => wanted.includes(t.name));
  // read again on SIGHUP and when the file changes: the same checks, the same names (or --all)
  const read = () => {
    const again = loadFile(file.path);
    const names = again.tunnels.map((t) => t.name);
    const gone = values.all ? [] : wanted.filter((n) => !names.includes(n));
    if (gone.length > 0) throw new UsageError(`no tunnel named ${gone.map((n) => `'${n}'`).join(", ")} in it any more (it has: ${names.join(", ")})`);
    const picked = values.all ? again.tunnels : again.tunnels.filter((t) => wanted.includes(t.name));
    checkHandshake(picked);
    return { file: again, tunnels: picked };
  };
  return runAgent(tunnels, values, { server: file.server, token: file.token, proxy: file.proxy, insecure: file.insecure }, {
    remote,
    started: (set, out) => followTunnelsFile({ path: file.path, read, first: file, running: tunnels }, set, out),
  });
}

/** `burrow config check [--config FILE]`: exit 0 and a summary, or exit 2 and the first mistake. */
export async function configCommand(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub === undefined || sub === "--help" || sub === "-h") {
    process.stdout.write(helpText(CONFIG_DOC));
    return sub === undefined ? 2 : 0;
  }
  if (sub !== "check") throw new UsageError(`unknown config command '${sub}' (burrow config check)`);
  const { values, positionals } = parseFlags(rest, CONFIG_FLAGS);
  if (values.help) return void process.stdout.write(helpText(CONFIG_DOC)), 0;
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals[0]}'`);
  const file = loadFile(values.config as string | undefined);
  const width = Math.max(...file.tunnels.map((t) => t.name.length));
  process.stdout.write(`${file.path}: ok, ${file.tunnels.length} tunnel${file.tunnels.length === 1 ? "" : "s"}\n`);
  for (const t of file.tunnels) process.stdout.write(`  ${t.name.padEnd(width)}  ${describe(t)}\n`);
  return 0;
}

function describe(t: TunnelsFile["tunnels"][number]): string {
  const local = `${t.target.tls ? "https://" : ""}${t.target.host.includes(":") ? `[${t.target.host}]` : t.target.host}:${t.target.port}`;
  const r = t.request;
  // every kind but http: where it is reached, its PROXY protocol header and IP rules; http has options of its own
  if (r.protocol !== "http") {
    const rules = [...(t.target.proxyProtocol ? ["proxy_protocol"] : []), ...describeAccess(r.access), ..."policy" in r && r.policy !== undefined ? [describePolicy(r.policy)] : []];
    const where = isPortKind(r) ? (r.port !== undefined ? `port ${r.port}` : "any port") : `${r.subdomain ?? "(random name)"}${r.hostname ? ` and ${r.hostname}` : ""}`;
    return `${r.protocol}  ${where} -> ${local}${rules.length ? `  (${rules.join(", ")})` : ""}`;
  }
  const extras = [
    t.target.hostHeader !== undefined ? `host_header ${t.target.hostHeader}` : "",
    t.target.upstreamProtocol !== undefined ? `upstream_protocol ${t.target.upstreamProtocol}` : "",
    ...(t.target.routes ?? []).map((r) => `${r.prefix} -> ${r.target.tls ? "https://" : ""}${localAuthority(r.target)}`),
    r.allowUpgrade?.length ? `allow_upgrade ${r.allowUpgrade.join(", ")}` : "",
    r.skipWarning ? "skip_warning" : "",
    r.responseTimeout !== undefined ? `response_timeout ${r.responseTimeout} s` : "",
    t.inspect ? "" : "not inspected",
    ...describeAccess(r.access),
    r.policy !== undefined ? describePolicy(r.policy) : "",
  ].filter(Boolean);
  return `http ${r.subdomain ?? "(random name)"}${r.hostname ? ` and ${r.hostname}` : ""} -> ${local}${extras.length ? `  (${extras.join(", ")})` : ""}`;
}
