/**
 * The agent commands' flags and their help: what they share (the server,
 * the output, the inspector), the groups of flags several tunnel kinds take
 * (each kind's command, with its own, is its unit in kinds/), and burrow
 * start's and config check's. The parsers (agent.ts, start.ts) read these
 * tables, and --help and docs/reference/cli.md are made from them.
 */
import type { FlagTable } from "../config/flags.ts";
import { DEFAULT_LOG_LEVEL, LOG_LEVELS } from "./agent-output/levels.ts";
import { INSPECT_FLAGS } from "./inspect-flags.ts";
import type { CommandDoc } from "./usage.ts";

const SAVED = "the file burrow login wrote";

/** Flags every agent command takes (burrow http, tcp, start). */
export const COMMON = {
  server: {
    type: "string",
    arg: "URL",
    alsoEnv: ["BURROW_SERVER"],
    defaultText: SAVED,
    help: "the burrow server, e.g. https://tunnels.example.com",
    details: "The server's public URL. `burrow start` takes the file's `server:` before what `burrow login` saved.",
  },
  token: {
    type: "string",
    arg: "T",
    alsoEnv: ["BURROW_TOKEN"],
    defaultText: SAVED,
    help: "your device token, brw_...",
    details: "`burrow start` takes the file's `token:` before what `burrow login` saved.",
  },
  "token-file": {
    type: "string",
    arg: "FILE",
    alsoEnv: ["BURROW_TOKEN_FILE"],
    help: "read the token from FILE, e.g. a container's secret",
    details:
      "The token alone (whitespace around it is ignored), at most 4 KiB. Instead of `--token` (both is refused), and `BURROW_TOKEN_FILE` instead of `BURROW_TOKEN`; either pair wins over the file's `token:` and what `burrow login` saved.",
  },
  proxy: {
    type: "string",
    arg: "URL",
    alsoEnv: ["HTTPS_PROXY", "ALL_PROXY"],
    help: "reach the server through an http://, https:// or socks5:// proxy",
    details: "The variables are read in either case (`https_proxy`, `all_proxy`). The handshake declares the proxy (the user's `can_use_proxy` decides); through one the agent never moves to the direct port.",
  },
  insecure: { type: "boolean", help: "accept a server certificate that does not verify" },
  /** screen | text | json: the live screen is the default on a terminal, text lines elsewhere. */
  log: {
    type: "string",
    arg: "F",
    env: true,
    defaultText: "screen on a terminal, else text",
    help: "screen, text or json; json is one object per line per event",
    details:
      "`screen`: the live screen (where stdout is not a terminal, or with `TERM=dumb`, `screen` means `text`, so a command line copied into a unit file still runs); `text`: a line per event, as when piped; `json`: one JSON object per line per event, for scripts. See [the agent's screen and logs](#the-agents-screen-and-logs).",
  },
  /** debug | info | warn | error (default info): what text lines and JSON show. */
  "log-level": {
    type: "string",
    arg: "L",
    env: true,
    default: DEFAULT_LOG_LEVEL,
    help: `${LOG_LEVELS.slice(0, -1).join(", ")} or ${LOG_LEVELS.at(-1)}: what text and json show`,
    details: "That level and above. The screen always shows everything.",
  },
  ...INSPECT_FLAGS,
  "remote-restart": {
    type: "string",
    arg: "on|off",
    env: true,
    default: "on",
    help: "whether the server's admin may ask this agent to connect again (POST /api/agents/ID/restart)",
    details: "On, an admin's ask makes the agent leave its connection and connect again at once, its tunnels' names held for it meanwhile. Off, it answers no, and the admin's API says so.",
  },
  "remote-update": {
    type: "string",
    arg: "on|off",
    env: true,
    default: "off",
    help: "whether the server's admin may ask this agent to run `burrow update` (POST /api/agents/ID/update)",
    details: "On, an admin's ask runs `burrow update` beside the agent (a signed release, checked as `burrow update` checks it); the new version runs once the agent is restarted (by its service, or by hand). Off, it answers no.",
  },
} as const satisfies FlagTable;

/** http and tls tunnels: one set of names for both. */
export const SUBDOMAIN_FLAG = {
  subdomain: {
    type: "string",
    arg: "S",
    defaultText: "a random one",
    help: "ask for this name",
    details: "A random name has 8 characters. http and tls tunnels take their names from the same ones.",
  },
  hostname: {
    type: "string",
    arg: "H",
    help: "be reached by this custom hostname, such as demo.acme.com",
    details: "A verified hostname of your user's (the server's admin registers it: /api/hostnames), or one name under a verified wildcard. Alone, the tunnel has no subdomain; with --subdomain, both names.",
  },
} as const satisfies FlagTable;

/** http and tcp tunnels: several agents of one user behind one name or port. */
export const POOL_FLAGS = {
  pool: {
    type: "boolean",
    help: "share the name (or port) with your other agents that ask for it with --pool",
    details: "Requests (http) or connections (tcp) are spread over the pool's members; the name stays while any member is there. Another user's agent is still refused it. One server only, not several nodes.",
  },
  "pool-balance": {
    type: "string",
    arg: "HOW",
    default: "round-robin",
    help: "how the pool spreads them: round-robin, or least-requests (the member with the fewest in flight)",
    details: "The first member's choice holds for the pool.",
  },
  "health-check": {
    type: "string",
    arg: "PATH|tcp",
    help: "a pool member's health check: GET PATH of your service (2xx or 3xx is healthy), or tcp: a connect",
    details: "Every --health-interval; 2 failures in a row take the member out of the pool's rotation, 2 successes put it back.",
  },
  "health-interval": { type: "string", arg: "S", default: "5", help: "seconds between health checks (1 to 3600)" },
  "drain-timeout": {
    type: "string",
    arg: "S",
    default: "15",
    help: "on Ctrl-C or SIGTERM, how long a pool member waits for what is in flight after leaving the rotation (0 to 3600)",
  },
} as const satisfies FlagTable;

/** A private tunnel: no public port or name, reached with `burrow connect owner/name` (docs/private.md). */
export const PRIVATE_FLAGS = {
  private: {
    type: "boolean",
    help: "nothing public: reached only with `burrow connect you/NAME`, by you and those you --share with",
  },
  name: {
    type: "string",
    arg: "NAME",
    help: "the private tunnel's name (with --private): 1-63 characters from a-z, 0-9 and -",
  },
  share: {
    type: "string",
    arg: "USERS",
    help: "with --private: the usernames that may connect, comma-separated (bob,carol)",
    details: "An unknown username refuses the tunnel, naming it. Starting again with another list unshares at once: a connector left out is closed.",
  },
} as const satisfies FlagTable;

/** tcp and tls tunnels: the visitor's address for a service below HTTP. */
export const PROXY_PROTOCOL_FLAG = {
  "proxy-protocol": {
    type: "boolean",
    help: "start each connection to your service with a PROXY protocol v2 header naming the visitor",
    details:
      "For nginx (`listen ... proxy_protocol`), HAProxy (`accept-proxy`) and what sits behind them: they then see the visitor's address and port instead of the agent's. The service must expect the header on every connection.",
  },
} as const satisfies FlagTable;

/** burrow start's and burrow config check's file. */
export const CONFIG_FLAGS = {
  config: {
    type: "string",
    arg: "FILE",
    env: true,
    defaultText: "./burrow.yml, else burrow.yml in the config directory",
    help: "the config file to read",
    details: "The config directory is `~/.config/burrow` on Linux (see [Connecting](#connecting-what-burrow-http-tcp-and-start-share)).",
  },
} as const satisfies FlagTable;

export const START_FLAGS = {
  ...COMMON,
  ...CONFIG_FLAGS,
  all: { type: "boolean", help: "start every tunnel of the file" },
  remote: { type: "boolean", help: "run the tunnels the server keeps for this device's token, following each change (with --config, a file's beside them)" },
} as const satisfies FlagTable;

export const AGENT_GROUP = { title: "The server, the output and the request inspector:", flags: Object.keys(COMMON) };

export const START_DOC: CommandDoc = {
  name: "start",
  usage: ["burrow start NAME... [flags]", "burrow start --all [flags]", "burrow start --remote [--config FILE NAME...|--all] [flags]"],
  about: `Starts tunnels of a config file, all over one connection to the server.
The file: --config FILE (or BURROW_CONFIG), else ./burrow.yml, else
burrow.yml in burrow's config directory (~/.config/burrow on Linux).

  server: https://tunnels.example.com   # optional; --server and BURROW_SERVER win
  token: brw_...                        # optional; --token and BURROW_TOKEN win
  tunnels:
    web: { proto: http, addr: 3000, subdomain: myapp }
    db:  { proto: tcp, addr: 5432, remote_port: 40000 }
    dns: { proto: udp, addr: 53 }

Who may reach a tunnel: basic_auth, allow_cidr, deny_cidr, request_header_add,
request_header_remove, response_header_add (lists, as the flags of burrow http)
and oidc: { issuer, client_id, client_secret, allow_emails }.

A tunnel the server refuses (a subdomain taken, say) is reported by name and
the others run; only when every tunnel is refused does burrow exit 1.
A tunnel with 'inspect: false' is left out of the request inspector.

The file is read again on SIGHUP and when it changes: new tunnels are added
and gone ones removed on the live connection, the others untouched; a file
that no longer reads is refused with its error and the tunnels running stay.

--remote runs the tunnels the server keeps for this device's token (set in
the admin panel or the portal) and follows each change as it is made. It
reads no burrow.yml unless --config names one: that file's tunnels then run
beside the server's, and where both name a tunnel, the server's wins.`,
  flags: START_FLAGS,
  groups: [{ title: "Flags:", flags: ["all", "config", "remote"] }, AGENT_GROUP],
};

export const CONFIG_DOC: CommandDoc = {
  name: "config check",
  usage: ["burrow config check [--config FILE]"],
  about: `Checks a burrow.yml (the one burrow start would read) without connecting:
exit 0 with a summary of its tunnels, or exit 2 with FILE:LINE: FIELD: why.`,
  flags: CONFIG_FLAGS,
};
