/**
 * `burrow diagnose` flags and help. The command (diagnose.ts) reads this
 * table; --help and docs/reference/cli.md are made from it.
 */
import type { FlagTable } from "../../config/flags.ts";
import { COMMON, CONFIG_FLAGS } from "../agent-flags.ts";
import type { CommandDoc } from "../usage.ts";
import { DEFAULT_SERVICE_NAME } from "../service/agent-service.ts";

export const DEFAULTS = { timeoutS: 5, clockToleranceS: 60, logLines: 1000 } as const;
export const BOUNDS = { timeoutS: [1, 60], clockToleranceS: [1, 86_400], logLines: [1, 10_000] } as const;

export const DIAGNOSE_FLAGS = {
  config: {
    ...CONFIG_FLAGS.config,
    help: "the config file whose tunnels are checked (and its server:, token:, proxy:)",
    details: "As `burrow start` finds it; without one, every check but the tunnels'.",
  },
  remote: {
    type: "boolean",
    help: "also check the tunnels the server keeps for this token (as burrow start --remote runs them)",
    details: "The server's config is read as the agent reads it, and its tunnels are checked beside those of a file `--config` (or BURROW_CONFIG) names; where both name a tunnel, the server's is checked and the file's is set aside, as the agent does. Without `--config`, no burrow.yml is read, as with `burrow start --remote`.",
  },
  json: { type: "boolean", help: "one JSON object for scripts instead of the report (its shape: below)" },
  bundle: {
    type: "string",
    arg: "FILE",
    help: "also write the report, the config file and the agent's recent log, secrets masked, to FILE (mode 0600)",
    details: "For a support request. The log: `--log-file`, else the agent service's (`burrow service install`): its unit's journal, or the file launchd or WinSW writes. Masked: burrow's tokens, passwords and URLs' passwords, cookies, Authorization values, and the value of any field named like a secret (`token=`, `\"password\":`, basic_auth, client_secret).",
  },
  "log-file": { type: "string", arg: "FILE", help: "the agent's log for --bundle (what it printed with --log text or --log json)" },
  "log-lines": { type: "string", arg: "N", default: String(DEFAULTS.logLines), help: `lines of the log --bundle takes, from its end (${BOUNDS.logLines[0]}-${BOUNDS.logLines[1].toLocaleString("en-US")})`, details: "At most the last 4 MiB of the file are read." },
  service: { type: "string", arg: "NAME", default: DEFAULT_SERVICE_NAME, help: "the agent service whose log --bundle takes (burrow service install --name)" },
  timeout: { type: "string", arg: "S", default: String(DEFAULTS.timeoutS), help: `each check's time limit, in seconds (${BOUNDS.timeoutS[0]}-${BOUNDS.timeoutS[1]})`, details: "Each network step of a check (a lookup, a connection, a TLS handshake, an answer) has this long; past it the check fails with TIMEOUT." },
  "clock-tolerance": {
    type: "string",
    arg: "S",
    default: String(DEFAULTS.clockToleranceS),
    help: "how far this machine's clock may be from the server's, in seconds",
    details: `${BOUNDS.clockToleranceS[0]} to ${BOUNDS.clockToleranceS[1].toLocaleString("en-US")}; further apart, the clock check fails. The server's clock is read from its answer's \`Date\` (whole seconds).`,
  },
  server: COMMON.server,
  token: COMMON.token,
  "token-file": COMMON["token-file"],
  proxy: COMMON.proxy,
  insecure: { ...COMMON.insecure, details: "As the agent would run: a certificate that does not verify is then a warning, not a failure." },
} as const satisfies FlagTable;

export const DIAGNOSE_DOC: CommandDoc = {
  name: "diagnose",
  usage: ["burrow diagnose [--config FILE] [--remote] [--json] [--bundle FILE] [flags]"],
  about: `Checks, in order, what an agent needs to connect, and says which check fails
and what to do: the server's name resolves, a TCP connection to its port,
TLS (the certificate valid for the name, its expiry), the proxy (from the
flags, the config file or HTTPS_PROXY / ALL_PROXY), the agents' WebSocket
path, the direct agent port, this machine's clock against the server's,
protocol and version, the token (valid, enabled, its user's limits), with
--remote the tunnels the server keeps for the token (read as the agent reads
them), and each tunnel of the config file or the server's config (its name
free or reserved for this user, its port allowed). Nothing is opened on the
server. Exit 0 when no check fails
(warnings and skipped checks aside), 1 when one does, 2 for a mistake in the
command line.`,
  flags: DIAGNOSE_FLAGS,
  groups: [
    { title: "Flags:", flags: ["config", "remote", "json", "bundle", "log-file", "log-lines", "service", "timeout", "clock-tolerance"] },
    { title: "The server (as burrow start takes it):", flags: ["server", "token", "token-file", "proxy", "insecure"] },
  ],
};
