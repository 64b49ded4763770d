#!/usr/bin/env bun
/** burrow: argv -> command. */
import { MAIN_HELP } from "./cli/help.ts";
import { httpCommand, tcpCommand } from "./cli/agent.ts";
import { loginCommand } from "./cli/login.ts";
import { serverCommand } from "./cli/server.ts";
import { EXIT_USAGE, UsageError } from "./config/usage.ts";
import { VERSION } from "./version.ts";

const COMMANDS: Record<string, (argv: string[]) => Promise<number>> = {
  server: serverCommand,
  http: httpCommand,
  tcp: tcpCommand,
  login: loginCommand,
};

async function main(argv: string[]): Promise<number> {
  const [first, ...rest] = argv;
  if (first === undefined || first === "--help" || first === "-h" || first === "help") {
    process.stdout.write(MAIN_HELP);
    return first === undefined ? EXIT_USAGE : 0;
  }
  if (first === "--version" || first === "-v" || first === "version") {
    console.log(`burrow ${VERSION}`);
    return 0;
  }
  const command = COMMANDS[first];
  if (!command) throw new UsageError(`unknown command '${first}' (see burrow --help)`);
  return command(rest);
}

try {
  process.exitCode = await main(process.argv.slice(2));
} catch (err) {
  if (err instanceof UsageError) {
    console.error(`burrow: ${err.message}`);
    process.exitCode = EXIT_USAGE;
  } else {
    console.error(err);
    process.exitCode = 1;
  }
}
