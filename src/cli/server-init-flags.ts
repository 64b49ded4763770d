/**
 * `burrow server init` flags: its own, and the server's, which go through
 * the server's own parser and checks so that a unit is never written with a
 * flag the server would refuse at its first start. The environment
 * (BURROW_<FLAG>) is not read: the service does not inherit it, so the unit
 * holds exactly the flags given here.
 */
import { posix, resolve } from "node:path";
import { parseFlags, type FlagSpec } from "../config/flags.ts";
import { parsePublicIps, type PublicAddresses } from "../dns/public-address.ts";
import { parseServerConfig, SERVER_FLAGS, type ServerConfig } from "../config/server.ts";
import { executableProblem, pathProblem } from "./systemd-unit.ts";
import { UsageError } from "../usage-error.ts";

export const INIT_DEFAULTS = {
  "unit-file": "/etc/systemd/system/burrow.service",
  "env-file": "/etc/burrow/burrow.env",
  /** ExecStart's executable when init runs from source, not from the compiled burrow. */
  binary: "/usr/local/bin/burrow",
  /** systemd's StateDirectory= lives under /var/lib. */
  "data-dir": "/var/lib/burrow",
} as const;

const INIT_FLAGS: Record<string, FlagSpec> = {
  "unit-file": { type: "string" },
  "env-file": { type: "string" },
  binary: { type: "string" },
  "public-ip": { type: "string", multiple: true },
  force: { type: "boolean" },
  print: { type: "boolean" },
};

/** The server's flags as plain strings, without their environment fallback. */
const SERVER_FLAGS_NO_ENV: Record<string, FlagSpec> = Object.fromEntries(Object.keys(SERVER_FLAGS).map((name) => [name, { type: "string" }]));

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

  const string = (name: keyof typeof INIT_DEFAULTS) => (typeof values[name] === "string" ? (values[name] as string) : undefined);
  const tls = config.tls ? { cert: resolve(cwd, config.tls.cert), key: resolve(cwd, config.tls.key) } : undefined;
  for (const [flag, path] of Object.entries(tls ?? {})) {
    const problem = pathProblem(path);
    if (problem) throw new UsageError(`--tls-${flag} ${problem} (got '${path}')`);
  }
  const unitFile = resolve(cwd, string("unit-file") ?? INIT_DEFAULTS["unit-file"]);
  if (!unitFile.endsWith(".service")) throw new UsageError(`--unit-file must name a file ending in .service, which is what systemd loads (got '${unitFile}')`);
  const envFile = resolve(cwd, string("env-file") ?? INIT_DEFAULTS["env-file"]);
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
  if (!given) return INIT_DEFAULTS["data-dir"].slice("/var/lib/".length);
  const dir = posix.normalize(dataDir).replace(/\/+$/, "");
  const name = dir.startsWith("/var/lib/") ? dir.slice("/var/lib/".length) : "";
  if (!STATE_DIRECTORY.test(name) || name.split("/").some((part) => part === "." || part === "..")) {
    throw new UsageError(
      `--data-dir must be below /var/lib, the only place the service may write (systemd's StateDirectory=), e.g. /var/lib/burrow (got '${dataDir}')`,
    );
  }
  return name;
}
