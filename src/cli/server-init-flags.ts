/**
 * `burrow server init` flags: its own, and the server's, which go through
 * the server's own parser and checks so that a unit is never written with a
 * flag the server would refuse at its first start. The environment
 * (BURROW_<FLAG>) is not read: the service does not inherit it, so the unit
 * holds exactly the flags given here.
 */
import { posix, resolve } from "node:path";
import { parseFlags, type FlagTable } from "../config/flags.ts";
import { parsePublicIps, type PublicAddresses } from "../dns/public-address.ts";
import { parseServerConfig, type ServerConfig } from "../config/server.ts";
import { SERVER_FLAGS } from "../config/server-flags.ts";
import type { CommandDoc } from "./usage.ts";
import { executableProblem, pathProblem } from "./systemd-unit.ts";
import { UsageError } from "../usage-error.ts";

/** ExecStart's executable when init runs from source, not from the compiled burrow. */
export const FROM_SOURCE_BINARY = "/usr/local/bin/burrow";

/** init's own flags, and the two server flags that mean something else here. */
export const INIT_FLAGS = {
  domain: { type: "string", arg: "D", required: true, help: "public domain; tunnels are <name>.D" },
  "unit-file": {
    type: "string",
    arg: "PATH",
    default: "/etc/systemd/system/burrow.service",
    help: "the unit to write",
    details: "Its name must end in `.service`, which is what systemd loads.",
  },
  "env-file": {
    type: "string",
    arg: "PATH",
    default: "/etc/burrow/burrow.env",
    help: "the environment file, mode 0600; kept as it is when it exists",
    details: "It holds `BURROW_ADMIN_PASSWORD`, generated.",
  },
  binary: {
    type: "string",
    arg: "PATH",
    default: FROM_SOURCE_BINARY,
    defaultText: `this executable; run from source, ${FROM_SOURCE_BINARY}`,
    help: "the burrow the unit runs",
    details: "What `ExecStart=` runs; run from source (`bun src/main.ts`), init says which it took.",
  },
  // systemd's StateDirectory= lives under /var/lib
  "data-dir": {
    type: "string",
    arg: "DIR",
    default: "/var/lib/burrow",
    help: "below /var/lib, the service's state directory",
    details: "It is the service's `StateDirectory=`, the one place the sandbox lets it write.",
  },
  "public-ip": {
    type: "string",
    arg: "IP",
    multiple: true,
    defaultText: "guessed from this machine's interfaces",
    help: "the server's public address for the DNS records, IPv4 or IPv6, or a comma list",
    details: "Guessed: the addresses of this machine's interfaces that are not loopback, private, link-local or CGNAT, with a note that they were guessed (no outside service is asked).",
  },
  force: {
    type: "boolean",
    help: "replace an existing unit (the environment file never is)",
    details: "Without it, init refuses to replace a unit: exit code 1.",
  },
  print: { type: "boolean", help: "show the unit, the environment file (password masked) and the DNS records; write nothing" },
} as const satisfies FlagTable;

/** The server's flags as plain strings, without their environment fallback. */
const SERVER_FLAGS_NO_ENV: FlagTable = Object.fromEntries(Object.entries(SERVER_FLAGS).map(([name, spec]) => [name, { ...spec, env: false }]));

export const INIT_DOC: CommandDoc = {
  name: "server init",
  usage: ["burrow server init --domain D [server flags] [flags]"],
  about: `Writes a systemd unit that runs 'burrow server' with the server flags given
(sandboxed, as a user systemd makes up, data in /var/lib/burrow), and an
environment file with a generated password for the first admin, shown once.
Then prints the DNS records to create, the ports to open and what to run.
The server flags are those of burrow server --help, checked the same way;
BURROW_<FLAG> variables are not read (the service does not see them).`,
  flags: INIT_FLAGS,
};

/** The unit sets these itself: the data dir is the state directory, the TLS files come as credentials. */
const SET_BY_THE_UNIT = new Set(["data-dir", "tls-cert", "tls-key"]);

/** A state directory name: below /var/lib, plain characters, so it needs no quoting anywhere. */
const STATE_DIRECTORY = /^[A-Za-z0-9_.-]+(\/[A-Za-z0-9_.-]+)*$/;

export interface InitOptions {
  /** The server's settings, as the service will have them. */
  config: ServerConfig;
  /** Server flags for ExecStart, as given, in the server's order, without those in SET_BY_THE_UNIT. */
  serverArgs: string[];
  /** Below /var/lib. */
  stateDirectory: string;
  /** Absolute paths. */
  tls?: { cert: string; key: string };
  unitFile: string;
  envFile: string;
  /** --binary, absolute; undefined: this executable. */
  binary?: string;
  /** --public-ip; undefined: guess from the interfaces. */
  publicIps?: PublicAddresses;
  force: boolean;
  print: boolean;
}

export type ParsedInit = { help: true } | { help: false; options: InitOptions };

/** Reads `burrow server init` flags (argv after "init"); throws UsageError with a one-line message. */
export function parseServerInit(argv: string[], cwd = process.cwd()): ParsedInit {
  const { values, positionals } = parseFlags(argv, { ...SERVER_FLAGS_NO_ENV, ...INIT_FLAGS }, {});
  if (values.help) return { help: true };
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals[0]}'`);
  if (values.domain === undefined) throw new UsageError("server init needs --domain, the name tunnels live under, e.g. --domain tunnels.example.com");

  const given = Object.keys(SERVER_FLAGS).flatMap((name) => (typeof values[name] === "string" ? [[name, values[name]] as const] : []));
  const server = parseServerConfig(given.flatMap(([name, value]) => [`--${name}`, value]), {});
  if (server.help) return { help: true };
  const config = server.config;
  const state = stateDirectory(config.dataDir, typeof values["data-dir"] === "string");

  const string = (name: keyof typeof INIT_FLAGS) => (typeof values[name] === "string" ? (values[name] as string) : undefined);
  const tls = config.tls ? { cert: resolve(cwd, config.tls.cert), key: resolve(cwd, config.tls.key) } : undefined;
  for (const [flag, path] of Object.entries(tls ?? {})) {
    const problem = pathProblem(path);
    if (problem) throw new UsageError(`--tls-${flag} ${problem} (got '${path}')`);
  }
  const unitFile = resolve(cwd, string("unit-file") ?? INIT_FLAGS["unit-file"].default);
  if (!unitFile.endsWith(".service")) throw new UsageError(`--unit-file must name a file ending in .service, which is what systemd loads (got '${unitFile}')`);
  const envFile = resolve(cwd, string("env-file") ?? INIT_FLAGS["env-file"].default);
  const envProblem = pathProblem(envFile);
  if (envProblem) throw new UsageError(`--env-file ${envProblem} (got '${envFile}')`);
  const binaryGiven = string("binary");
  const binary = binaryGiven === undefined ? undefined : resolve(cwd, binaryGiven);
  const binaryProblem = binary === undefined ? undefined : executableProblem(binary);
  if (binaryProblem) throw new UsageError(`--binary ${binaryProblem} (got '${binary}')`);
  const ips = (values["public-ip"] as string[] | undefined) ?? [];

  return {
    help: false,
    options: {
      config: { ...config, dataDir: `/var/lib/${state}` },
      serverArgs: given.filter(([name]) => !SET_BY_THE_UNIT.has(name)).flatMap(([name, value]) => [`--${name}`, value]),
      stateDirectory: state,
      tls,
      unitFile,
      envFile,
      binary,
      publicIps: ips.length > 0 ? parsePublicIps(ips) : undefined,
      force: values.force === true,
      print: values.print === true,
    },
  };
}

/**
 * The service's data dir must be its StateDirectory=: the one place the
 * sandbox lets it write, created and owned by systemd for the service's user.
 */
function stateDirectory(dataDir: string, given: boolean): string {
  if (!given) return INIT_FLAGS["data-dir"].default.slice("/var/lib/".length);
  const dir = posix.normalize(dataDir).replace(/\/+$/, "");
  const name = dir.startsWith("/var/lib/") ? dir.slice("/var/lib/".length) : "";
  if (!STATE_DIRECTORY.test(name) || name.split("/").some((part) => part === "." || part === "..")) {
    throw new UsageError(
      `--data-dir must be below /var/lib, the only place the service may write (systemd's StateDirectory=), e.g. /var/lib/burrow (got '${dataDir}')`,
    );
  }
  return name;
}
