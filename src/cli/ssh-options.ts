/**
 * The remote command of an SSH gateway session as its forwards' options:
 * `ssh -p 2222 -R demo:80:localhost:3000 host --basic-auth me:pw` takes the
 * flags of `burrow http|tcp|tls` that make sense there, read by the same
 * code as the commands' (config/flags.ts, tunnel-flags.ts, the one tunnel
 * spec), so a mistake is refused with the CLI's words. The -R address
 * names the tunnel (its subdomain or custom hostname; with --private, its
 * private name) and its port says the kind, so the flags that name a
 * tunnel, pools, routes and the agent's own are not taken. Nothing is read
 * from the server's environment (BURROW_BASIC_AUTH is the agent's).
 *
 * Some flags of the commands cannot work here and are refused with why
 * (NOT_OVER_SSH): --policy-file names a file the server cannot read, and
 * --upstream-protocol h2 needs TLS to the service, which an SSH channel
 * does not carry (h2c does). A tunnel opened here has no traffic policy of
 * its own; the operator's policies hold on it as on any tunnel.
 */
import { parseFlags, type FlagSpec, type FlagTable } from "../config/flags.ts";
import type { ForwardAsk, ForwardOptions, ForwardOptionsReader } from "../ssh/forward-options.ts";
import { UsageError } from "../usage-error.ts";
import { HTTP_FLAGS } from "./kinds/http.ts";
import { TCP_FLAGS } from "./kinds/tcp.ts";
import { TLS_FLAGS } from "./kinds/tls.ts";
import { tunnelFromFlags } from "./tunnel-flags.ts";

const pick = <T extends FlagTable>(table: T, names: readonly (keyof T & string)[]): FlagTable => Object.fromEntries(names.map((n) => [n, table[n] as FlagSpec]));

const IP = ["allow-cidr", "deny-cidr"] as const;

/** Each kind's flags after `ssh ... host`. */
export const SSH_FLAGS: Record<ForwardAsk["kind"], FlagTable> = {
  http: pick(HTTP_FLAGS, [
    "skip-warning",
    "host-header",
    "allow-upgrade",
    "response-timeout",
    "upstream-protocol",
    "basic-auth",
    ...IP,
    "request-header-add",
    "request-header-remove",
    "response-header-add",
    "oidc-issuer",
    "oidc-client-id",
    "oidc-client-secret",
    "oidc-allow-email",
    "private",
    "share",
  ]),
  tcp: pick(TCP_FLAGS, ["private", "share", "proxy-protocol", ...IP]),
  tls: pick(TLS_FLAGS, ["proxy-protocol", ...IP]),
};

const ALL: FlagTable = { ...SSH_FLAGS.tls, ...SSH_FLAGS.tcp, ...SSH_FLAGS.http };

/** Flags of burrow http, tcp and tls that cannot work through the gateway, and why: read, so that they are refused in these words, not as unknown. */
const NO_POLICY_FILE =
  "the server cannot read a file on your machine, so a tunnel opened with ssh has no traffic policy of its own; open one with burrow http, tcp or tls --policy-file FILE (the operator's policies hold on tunnels opened with ssh all the same)";
export const NOT_OVER_SSH: Record<string, string> = { "policy-file": NO_POLICY_FILE, "traffic-policy-file": NO_POLICY_FILE };

/** What the gateway's channel to the -R target cannot carry: TLS to the service. */
const H2_OVER_SSH = "--upstream-protocol h2: the server reaches your -R target through the SSH connection, without TLS; use h2c for a service that speaks HTTP/2 without TLS";

/** The flags the gateway reads: those it takes, and those it refuses with why. */
const READ: FlagTable = { ...ALL, ...pick(HTTP_FLAGS, Object.keys(NOT_OVER_SSH) as (keyof typeof HTTP_FLAGS)[]) };

/** `command` split as a shell would split its words (quotes, backslashes); undefined when a quote is left open. */
export function shellWords(command: string): string[] | undefined {
  const words: string[] = [];
  let word = "";
  let inWord = false;
  let quote: '"' | "'" | undefined;
  for (let i = 0; i < command.length; i++) {
    const c = command[i]!;
    if (quote === "'") {
      if (c === "'") quote = undefined;
      else word += c;
    } else if (quote === '"') {
      if (c === '"') quote = undefined;
      else if (c === "\\" && i + 1 < command.length && '"\\$`'.includes(command[i + 1]!)) word += command[++i];
      else word += c;
    } else if (c === "'" || c === '"') {
      quote = c;
      inWord = true;
    } else if (c === "\\" && i + 1 < command.length) {
      word += command[++i];
      inWord = true;
    } else if (/\s/.test(c)) {
      if (inWord) words.push(word);
      word = "";
      inWord = false;
    } else {
      word += c;
      inWord = true;
    }
  }
  if (quote) return undefined;
  if (inWord) words.push(word);
  return words;
}

/** The options of a session's remote command, or the CLI's words for what is wrong with it. */
export const sshForwardOptions: ForwardOptionsReader = (command) => {
  const argv = shellWords(command);
  if (!argv) return { problem: "an unclosed quote in the options" };
  if (argv[0] === "--") argv.shift();
  let values: Record<string, unknown>;
  try {
    const parsed = parseFlags(argv, READ, {});
    if (parsed.values.help) return { problem: `the options after the host are burrow http's, tcp's and tls's: ${Object.keys(ALL).map((f) => `--${f}`).join(", ")}` };
    if (parsed.positionals.length > 0) return { problem: `unexpected argument '${parsed.positionals[0]}': this server runs no command, it takes options` };
    values = Object.fromEntries(Object.entries(parsed.values).filter(([, v]) => v !== undefined && !(Array.isArray(v) && v.length === 0)));
    const refused = Object.keys(NOT_OVER_SSH).find((flag) => flag in values);
    if (refused) return { problem: `--${refused}: ${NOT_OVER_SSH[refused]}` };
  } catch (err) {
    if (err instanceof UsageError) return { problem: err.message };
    throw err;
  }
  const options: ForwardOptions = {
    none: Object.keys(values).length === 0,
    apply(ask) {
      const table = SSH_FLAGS[ask.kind];
      const foreign = Object.keys(values).find((flag) => !(flag in table));
      if (foreign) return { problem: `unknown flag --${foreign} for a ${ask.kind} tunnel` };
      if (values["host-header"] === "rewrite") return { problem: "--host-header rewrite: the server does not know your -R target; give the Host to send, e.g. --host-header localhost:3000" };
      if (values["upstream-protocol"] === "h2") return { problem: H2_OVER_SSH };
      const named: Record<string, unknown> = { ...values };
      if (values.private) {
        if (ask.name === undefined) return { problem: "--private: name the tunnel in -R, NAME:PORT:HOST:PORT" };
        named.name = ask.name;
      } else if (ask.kind === "tcp") {
        if (ask.name !== undefined) return { problem: `'${ask.name}': a tcp tunnel has no name; -R 0:HOST:PORT for any port (--private names one)` };
        if (ask.port > 0) named["remote-port"] = String(ask.port);
      } else if (ask.name !== undefined) named[ask.name.includes(".") ? "hostname" : "subdomain"] = ask.name;
      try {
        const made = tunnelFromFlags(ask.kind, named, { host: "localhost", port: ask.kind === "tcp" ? ask.port : 0 });
        return {
          request: made.request,
          ...(made.target.hostHeader !== undefined ? { hostHeader: made.target.hostHeader } : {}),
          ...(made.target.proxyProtocol ? { proxyProtocol: true } : {}),
          ...(made.target.upstreamProtocol === "h2c" ? { upstreamProtocol: "h2c" as const } : {}),
        };
      } catch (err) {
        if (err instanceof UsageError) return { problem: err.message };
        throw err;
      }
    },
  };
  return options;
};
