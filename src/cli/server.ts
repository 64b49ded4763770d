/** `burrow server`: parse flags, start, stop cleanly on SIGTERM/SIGINT. */
import { parseServerConfig } from "../config/server.ts";
import { BootstrapError } from "../core/bootstrap.ts";
import { DatabaseUrlError } from "../db/open-postgres.ts";
import { DatabaseRefused } from "../db/plan.ts";
import { log, setLogFormat } from "../log.ts";
import { startServer } from "../server.ts";
import { SERVER_DOC } from "./server-help.ts";
import { sshForwardOptions } from "./ssh-options.ts";
import { helpText } from "./usage.ts";

export async function serverCommand(argv: string[]): Promise<number> {
  if (argv[0] === "init") return (await import("./server-init.ts")).serverInitCommand(argv.slice(1));
  if (argv[0] === "backup") return (await import("./server-backup.ts")).serverBackupCommand(argv.slice(1));
  if (argv[0] === "dns-check") return (await import("./server-dns-check.ts")).serverDnsCheckCommand(argv.slice(1));
  if (argv[0] === "health") return (await import("./server-health.ts")).serverHealthCommand(argv.slice(1));
  const parsed = parseServerConfig(argv);
  if (parsed.help) {
    process.stdout.write(helpText(SERVER_DOC));
    return 0;
  }
  setLogFormat(parsed.config.logFormat);
  let server;
  try {
    // an SSH session's command is read as burrow http's, tcp's and tls's flags
    server = await startServer(parsed.config, process.env, { forwardOptions: sshForwardOptions });
  } catch (err) {
    if (err instanceof BootstrapError || err instanceof DatabaseRefused) {
      console.error(`burrow: ${err.message}`);
      return 2;
    }
    if (err instanceof DatabaseUrlError) {
      console.error(`burrow: ${err.message}`);
      return 1;
    }
    const code = (err as { code?: string }).code;
    if (code === "EADDRINUSE" || code === "EACCES") {
      console.error(`burrow: cannot listen: ${(err as Error).message}`);
      return 1;
    }
    throw err;
  }
  return new Promise<number>((resolve) => {
    let stopping = false;
    // one signal drains (bounded by --drain-timeout); a repeat does not cut the drain short
    const shutdown = (signal: string) => {
      if (stopping) return log.info("already shutting down", { signal });
      stopping = true;
      log.info("shutting down", { signal });
      server.stop().then(() => resolve(0));
    };
    process.on("SIGTERM", () => shutdown("SIGTERM"));
    process.on("SIGINT", () => shutdown("SIGINT"));
  });
}
