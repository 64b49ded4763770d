/**
 * The systemd unit `burrow server init` writes, and the environment file
 * beside it: pure text from a spec, so every quoting rule is tested without
 * touching /etc.
 *
 * Quoting follows systemd.syntax(7) and systemd.service(5) "Command lines":
 * ExecStart= splits words at whitespace, honours double quotes and C escapes,
 * expands specifiers (`%n`) in the whole line and environment variables
 * (`$X`, `${X}`) in the arguments but not in the executable. So a literal
 * `%` is written `%%` everywhere, a literal `$` `$$` in arguments only, and a
 * backslash or double quote is escaped inside double quotes.
 */

export interface UnitSpec {
  /** The public domain, for the description. */
  domain: string;
  /** Absolute path of the burrow executable. */
  binary: string;
  /** Flags for `burrow server` other than --data-dir and the TLS files, which the unit sets itself. */
  serverArgs: string[];
  /** Below /var/lib: systemd creates it, owned by the service's user (StateDirectory=). */
  stateDirectory: string;
  /** Absolute paths of the certificate and key, handed over as credentials (see below). */
  tls?: { cert: string; key: string };
  /** Absolute path of the environment file with BURROW_ADMIN_PASSWORD. */
  envFile: string;
  /** Every port the server listens on (0 = any free port). */
  ports: number[];
  /** --drain-timeout, in seconds. */
  drainTimeoutS: number;
}

/**
 * After the drain the server still tells agents, flushes traffic counters
 * and closes the database (well under a second); the rest is room for a
 * loaded machine before systemd sends SIGKILL.
 */
export const STOP_MARGIN_S = 15;

/**
 * Restarts after a crash are 5 s apart: systemd gives up on a unit started
 * more than 5 times in 10 s (its default start limit), and a cause that
 * outlasts a few restarts (a port still held, a full disk) should not leave
 * the service dead for good.
 */
export const RESTART_SEC = 5;

/** Where the credentials systemd copies for the service are (%d, systemd 248+). */
const CREDENTIALS = "%d";

/** Safe to write bare: nothing here is split, expanded or unescaped by systemd. */
const BARE = /^[A-Za-z0-9_@+=:,./-]+$/;

/** Characters systemd refuses in an executable's name ("contains special characters"). */
const UNSAFE_IN_EXECUTABLE = /[\x00-\x1f\x7f"'\\]/;

/** The name, or why systemd would refuse it as ExecStart's executable. */
export function executableProblem(path: string): string | undefined {
  if (!path.startsWith("/")) return "must be an absolute path";
  if (UNSAFE_IN_EXECUTABLE.test(path)) return "must not contain quotes, backslashes or control characters (systemd refuses such an executable)";
  return undefined;
}

/** A path for a setting that takes the rest of its line literally (EnvironmentFile=, LoadCredential=). */
export function pathProblem(path: string): string | undefined {
  if (!path.startsWith("/")) return "must be an absolute path";
  if (/[\x00-\x1f\x7f]/.test(path)) return "must not contain control characters";
  return undefined;
}

/**
 * One word of ExecStart=. `executable`: the first word, where systemd
 * expands no environment variables, so `$` stays as it is.
 */
export function quoteExecWord(word: string, executable = false): string {
  let out = "";
  for (const ch of word) {
    if (ch === "%") out += "%%";
    else if (ch === "$" && !executable) out += "$$";
    else if (ch === "\\") out += "\\\\";
    else if (ch === '"') out += '\\"';
    else if (ch < " " || ch === "\x7f") out += `\\x${ch.charCodeAt(0).toString(16).padStart(2, "0")}`;
    else out += ch;
  }
  // %% and $$ need no quotes; anything else beyond BARE (spaces, quotes, a lone ";", ...) does
  return word !== "" && BARE.test(word.replaceAll("%", "").replaceAll("$", "")) ? out : `"${out}"`;
}

/** A literal value for a setting whose line only expands specifiers. */
const literal = (text: string) => text.replaceAll("%", "%%");

/** Binding a port below 1024 takes CAP_NET_BIND_SERVICE; 0 asks the kernel for a free (high) one. */
export const needsBindCapability = (ports: number[]) => ports.some((p) => p > 0 && p < 1024);

export const stopTimeoutS = (drainTimeoutS: number) => Math.ceil(drainTimeoutS) + STOP_MARGIN_S;

/**
 * The sandbox of burrow's services: what a network program that writes at
 * most its state directory can do without. The server's unit and the
 * agent's (`burrow service install`) both carry it.
 * Not here, on purpose: MemoryDenyWriteExecute (JavaScriptCore's JIT writes code), PrivateUsers
 * (capabilities in a user namespace do not bind low ports), ProcSubset=pid (the edge reads
 * /proc/net/tcp), SystemCallFilter (Bun's system calls are not a documented set).
 */
export const SANDBOX: readonly string[] = [
  "NoNewPrivileges=yes",
  "ProtectSystem=strict",
  "ProtectHome=yes",
  "PrivateTmp=yes",
  "PrivateDevices=yes",
  "ProtectKernelTunables=yes",
  "ProtectKernelModules=yes",
  "ProtectKernelLogs=yes",
  "ProtectControlGroups=yes",
  "ProtectClock=yes",
  "ProtectHostname=yes",
  "RestrictNamespaces=yes",
  "RestrictRealtime=yes",
  "RestrictSUIDSGID=yes",
  "LockPersonality=yes",
  "SystemCallArchitectures=native",
  "# netlink: getaddrinfo asks it which address families the host has",
  "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX AF_NETLINK",
];

export function renderUnit(spec: UnitSpec): string {
  const args: string[] = [quoteExecWord(spec.binary, true), "server", ...spec.serverArgs.map((a) => quoteExecWord(a))];
  args.push("--data-dir", quoteExecWord(`/var/lib/${spec.stateDirectory}`));
  if (spec.tls) args.push("--tls-cert", `${CREDENTIALS}/tls-cert`, "--tls-key", `${CREDENTIALS}/tls-key`);
  const bind = needsBindCapability(spec.ports);

  const lines = [
    "# Written by `burrow server init`; run it again with --force to rewrite this file.",
    "[Unit]",
    `Description=burrow tunnel server for ${literal(spec.domain)}`,
    // the public listeners bind to addresses the network may not have yet at boot
    "Wants=network-online.target",
    "After=network-online.target",
    "",
    "[Service]",
    // exec: a wrong path to the executable fails `systemctl start` instead of looking started
    "Type=exec",
    `ExecStart=${args.join(" ")}`,
    "# BURROW_ADMIN_PASSWORD lives here, not in this file: `systemctl show` prints Environment= to anyone",
    `EnvironmentFile=${literal(spec.envFile)}`,
    "# a user systemd makes up for the service: nothing to create, and it can write only its state directory",
    "DynamicUser=yes",
    `StateDirectory=${literal(spec.stateDirectory)}`,
    "StateDirectoryMode=0700",
    "UMask=0077",
  ];
  if (spec.tls) {
    lines.push(
      "# the certificate and key are copied for the service at each start, so they may stay readable by root only;",
      "# restart the service after renewing them",
      `LoadCredential=tls-cert:${literal(spec.tls.cert)}`,
      `LoadCredential=tls-key:${literal(spec.tls.key)}`,
    );
  }
  if (bind) {
    lines.push("# a port below 1024, and no other privilege", "AmbientCapabilities=CAP_NET_BIND_SERVICE", "CapabilityBoundingSet=CAP_NET_BIND_SERVICE");
  } else {
    lines.push("# every port is 1024 or above: no privilege at all", "CapabilityBoundingSet=");
  }
  lines.push(
    "# every visitor, agent and TCP connection is a file descriptor",
    "LimitNOFILE=65536",
    "Restart=on-failure",
    `RestartSec=${RESTART_SEC}s`,
    "# SIGTERM drains: the ports are let go at once, requests in flight get --drain-timeout",
    "KillSignal=SIGTERM",
    `TimeoutStopSec=${stopTimeoutS(spec.drainTimeoutS)}`,
    "# sandbox: what a network server that writes only its state directory can do without",
    ...SANDBOX,
    "",
    "[Install]",
    "WantedBy=multi-user.target",
    "",
  );
  return lines.join("\n");
}

/** What --print shows instead of the password. */
export const MASKED_PASSWORD = "<generated when written>";

/**
 * The environment file (KEY=VALUE lines, systemd.exec(5) EnvironmentFile=).
 * The password is base62, so it needs no quoting.
 */
export function renderEnvFile(password: string): string {
  return [
    "# Environment of burrow.service (EnvironmentFile=); keep this file mode 0600.",
    "# BURROW_ADMIN_PASSWORD is the first admin's password (user 'admin', or BURROW_ADMIN_USERNAME),",
    "# read only when the server starts with no admin in its database. Once you have signed in",
    "# and changed it, this line can go.",
    "# Any server flag may be set here too as BURROW_<FLAG>=value; a flag in ExecStart wins.",
    `BURROW_ADMIN_PASSWORD=${password}`,
    "",
  ].join("\n");
}
