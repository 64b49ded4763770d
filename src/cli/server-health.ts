/**
 * `burrow server health`: asks the server's own GET /readyz and exits 0
 * when it says ready, 1 otherwise: a container's HEALTHCHECK, where there
 * is no shell and no curl. It reads --admin-host and --admin-port as the
 * server does (flags, else BURROW_ADMIN_HOST / BURROW_ADMIN_PORT), so the
 * environment that configured the server points it at the right port.
 *
 * node:http rather than fetch: fetch would follow HTTP_PROXY, and a probe of
 * the server's own loopback must never go through a proxy.
 */
import { request } from "node:http";
import { parseFlags, type FlagTable } from "../config/flags.ts";
import { SERVER_FLAGS } from "../config/server-flags.ts";
import { UsageError } from "../usage-error.ts";
import { helpText, type CommandDoc } from "./usage.ts";

/** The most of /readyz's answer that is read: it is some 60 bytes. */
const MAX_BODY_BYTES = 64 * 1024;

export const HEALTH_FLAGS = {
  "admin-host": {
    ...SERVER_FLAGS["admin-host"],
    help: "the server's admin API address",
    details: "`0.0.0.0` and `::` are asked on loopback (`127.0.0.1`, `::1`).",
  },
  "admin-port": { ...SERVER_FLAGS["admin-port"], help: "the server's admin API port" },
  timeout: { type: "string", arg: "S", default: "5", help: "seconds to wait for the answer (1 to 300)" },
} as const satisfies FlagTable;

export const HEALTH_DOC: CommandDoc = {
  name: "server health",
  usage: ["burrow server health [--admin-port N] [--timeout S]"],
  about: `Asks the running server's GET /readyz on its admin port and exits 0 when it
answers ready, 1 when it answers not ready, does not answer, or takes longer
than --timeout. One line says which. For a container's HEALTHCHECK, where
there is no shell or curl to ask with; --admin-host and --admin-port come
from the same variables as the server's.`,
  flags: HEALTH_FLAGS,
};

/** Where /readyz is: a wildcard listen address is asked on loopback, where the server listens too. */
export function readyzUrl(host: string, port: string): string {
  if (!/^[0-9]{1,5}$/.test(port) || Number(port) < 1 || Number(port) > 65535) throw new UsageError(`--admin-port must be the server's admin port, 1 to 65535 (got '${port.slice(0, 40)}')`);
  const asked = host === "0.0.0.0" || host === "" ? "127.0.0.1" : host === "::" || host === "[::]" ? "::1" : host;
  if (!/^[0-9A-Za-z.:[\]-]{1,255}$/.test(asked)) throw new UsageError(`--admin-host must be an address or a host name (got '${host.slice(0, 60)}')`);
  const bracketed = asked.includes(":") && !asked.startsWith("[") ? `[${asked}]` : asked;
  return `http://${bracketed}:${port}/readyz`;
}

/** What /readyz answered, or why there is no answer. */
export function askReadyz(url: string, timeoutMs: number): Promise<{ status: number; body: string } | { error: string }> {
  return new Promise((resolve) => {
    const req = request(url, { method: "GET", headers: { accept: "application/json" }, timeout: timeoutMs, signal: AbortSignal.timeout(timeoutMs) }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on("data", (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_BODY_BYTES) return req.destroy(new Error("answer too long"));
        chunks.push(chunk);
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") }));
      res.on("error", (err) => resolve({ error: err.message }));
    });
    req.on("timeout", () => req.destroy(new Error(`no answer within ${timeoutMs / 1000} s`)));
    req.on("error", (err: NodeJS.ErrnoException) => resolve({ error: err.name === "AbortError" || err.name === "TimeoutError" ? `no answer within ${timeoutMs / 1000} s` : (err.code ?? err.message) }));
    req.end();
  });
}

export async function serverHealthCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, HEALTH_FLAGS);
  if (values.help) {
    process.stdout.write(helpText(HEALTH_DOC));
    return 0;
  }
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals[0]}'`);
  const timeoutText = (values.timeout as string | undefined) ?? HEALTH_FLAGS.timeout.default;
  const timeout = /^[0-9]{1,3}$/.test(timeoutText) ? Number(timeoutText) : NaN;
  if (!(timeout >= 1 && timeout <= 300)) throw new UsageError(`--timeout must be a whole number of seconds from 1 to 300 (got '${timeoutText.slice(0, 40)}')`);
  const url = readyzUrl((values["admin-host"] as string | undefined) ?? HEALTH_FLAGS["admin-host"].default, (values["admin-port"] as string | undefined) ?? HEALTH_FLAGS["admin-port"].default);
  const answer = await askReadyz(url, timeout * 1000);
  if ("error" in answer) {
    console.error(`burrow: not healthy: no answer from ${url}: ${answer.error}`);
    return 1;
  }
  let said: { status?: unknown; not_ready?: unknown } = {};
  try {
    said = JSON.parse(answer.body);
  } catch {
    // not the server's JSON: said stays empty, and the status decides
  }
  if (answer.status === 200 && said.status === "ready") {
    console.log(`ready (${url})`);
    return 0;
  }
  const failing = Array.isArray(said.not_ready) ? said.not_ready.filter((n) => typeof n === "string" && /^[a-z_-]{1,40}$/.test(n)).join(", ") : "";
  console.error(`burrow: not healthy: ${url} answered ${answer.status}${failing ? ` (not ready: ${failing})` : ""}`);
  return 1;
}
