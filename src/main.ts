#!/usr/bin/env bun
/** burrow: argv -> command. */
import { MAIN_HELP } from "./cli/help.ts";
import { KIND_NAMES } from "./protocol/kinds.ts";
import { EXIT_USAGE, UsageError } from "./usage-error.ts";
import { log, logFormat } from "./log.ts";
import { versionText } from "./version.ts";

type Command = (argv: string[]) => Promise<number>;

/**
 * Each command's code is loaded only when it runs: the server's pulls in
 * argon2's native binding, which the agent commands must never need (a
 * binary whose binding is missing or for another platform still runs
 * `burrow http`).
 */
const COMMANDS: Record<string, () => Promise<Command>> = {
  server: async () => (await import("./cli/server.ts")).serverCommand,
  // burrow http, tcp, tls, udp: a command for each kind of the kind table
  ...Object.fromEntries(KIND_NAMES.map((kind) => [kind, async () => (await import("./cli/agent.ts")).kindCommand(kind)])),
  login: async () => (await import("./cli/login.ts")).loginCommand,
  keys: async () => (await import("./cli/keys.ts")).keysCommand,
  connect: async () => (await import("./cli/connect.ts")).connectCommand,
  start: async () => (await import("./cli/start.ts")).startCommand,
  config: async () => (await import("./cli/start.ts")).configCommand,
  update: async () => (await import("./cli/update.ts")).updateCommand,
  policy: async () => (await import("./cli/policy.ts")).policyCommand,
  service: async () => (await import("./cli/service/service.ts")).serviceCommand,
  diagnose: async () => (await import("./cli/diagnose/diagnose.ts")).diagnoseCommand,
};

async function main(argv: string[]): Promise<number> {
  const [first, ...rest] = argv;
  if (first === undefined || first === "--help" || first === "-h" || first === "help") {
    process.stdout.write(MAIN_HELP);
    return first === undefined ? EXIT_USAGE : 0;
  }
  if (first === "--version" || first === "-v" || first === "version") {
    // the release key's line comes from update/, which only this command needs
    const { releaseKeyText } = await import("./update/release-key.ts");
    process.stdout.write(`${versionText()}key     ${releaseKeyText()}\n`);
    return 0;
  }
  const load = COMMANDS[first];
  if (!load) throw new UsageError(`unknown command '${first}' (see burrow --help)`);
  return (await load())(rest);
}

// no top-level await: a --bytecode build (see bench/startup.ts) cannot hold one
main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    if (err instanceof UsageError) {
      console.error(`burrow: ${err.message}`);
      process.exitCode = EXIT_USAGE;
    } else {
      // a server started with --log-format json keeps every line JSON, its last one too
      if (logFormat() === "json") log.error("burrow failed", { err: String(err), stack: err instanceof Error ? err.stack : undefined });
      else console.error(err);
      process.exitCode = 1;
    }
  },
);
