/**
 * `burrow --help`: the commands, one line each. Each command's own help is
 * made from its flag table (usage.ts); docs/reference/cli.md lists the
 * commands from here too.
 */
import { KIND_NAMES, KIND_UNITS } from "../protocol/kinds.ts";

export interface CommandLine {
  /** The command's name as the reference heads its section ("server init"); undefined for --help. */
  name?: string;
  /** What follows `burrow` on its line. */
  synopsis: string;
  summary: string;
}

export const COMMANDS: readonly CommandLine[] = [
  // burrow http, tcp, tls, udp: each kind's line is its unit's (protocol/kinds/)
  ...KIND_NAMES.map((name) => ({ name, synopsis: KIND_UNITS[name].display.synopsis, summary: KIND_UNITS[name].display.summary })),
  { name: "connect", synopsis: "connect OWNER/NAME", summary: "reach a private tunnel shared with you, through a local port" },
  { name: "start", synopsis: "start NAME... | --all", summary: "start tunnels named in burrow.yml, over one connection" },
  { name: "config check", synopsis: "config check", summary: "check burrow.yml without connecting" },
  { name: "policy check", synopsis: "policy check FILE", summary: "check a traffic policy file (YAML or JSON) without running it" },
  { name: "policy test", synopsis: "policy test FILE --request 'GET /'", summary: "try a traffic policy on one request, offline: what matches, what the edge would do" },
  { name: "login", synopsis: "login --server URL [--token T]", summary: `log this machine in (through the browser, or with a token) for ${KIND_NAMES.join(", ")} and start` },
  { name: "keys add", synopsis: "keys add [FILE]", summary: "add an SSH public key to your user, for tunnels with plain ssh -R (the server's SSH gateway)" },
  { name: "diagnose", synopsis: "diagnose [--json] [--bundle F]", summary: "check the way to the server, the token and the tunnels; say what fails and what to do" },
  { name: "service install", synopsis: "service install [--config F | --remote]", summary: "run the agent as a service of this machine (systemd, launchd, Windows)" },
  { name: "service uninstall", synopsis: "service uninstall", summary: "stop the agent's service and remove its files" },
  { name: "service status", synopsis: "service status", summary: "whether the agent's service is installed and runs" },
  { name: "server", synopsis: "server [flags]", summary: "run the tunnel server (edge + admin API)" },
  { name: "server init", synopsis: "server init --domain D [flags]", summary: "write a systemd unit for the server, print DNS records and ports" },
  { name: "server backup", synopsis: "server backup FILE", summary: "write a consistent copy of the server's database to FILE" },
  { name: "server dns-check", synopsis: "server dns-check --domain D", summary: "check the server's DNS records and its DNS-01 responder" },
  { name: "server health", synopsis: "server health", summary: "exit 0 when the running server says it is ready (/readyz): a container's health check" },
  { name: "update", synopsis: "update [--version V] [--check]", summary: "replace this executable with a newer signed release (--rollback undoes it)" },
  { synopsis: "--help", summary: "this text; burrow <command> --help for a command's flags" },
  { name: "version", synopsis: "version", summary: "print the version, commit, build date, target and release key (also --version)" },
];

/** The column the summaries start at; a longer synopsis puts its summary on the next line. */
const SUMMARY_COLUMN = 31;

export const MAIN_HELP = `burrow — self-hosted tunnels to services on your machine

Usage:
${COMMANDS.map(({ synopsis, summary }) => {
  const left = `  burrow ${synopsis}`;
  return left.length + 1 <= SUMMARY_COLUMN ? left.padEnd(SUMMARY_COLUMN) + summary : `${left}\n${" ".repeat(SUMMARY_COLUMN)}${summary}`;
}).join("\n")}

Every server flag may also be set in the environment as BURROW_<FLAG>
(--admin-port -> BURROW_ADMIN_PORT); a flag on the command line wins.
`;
