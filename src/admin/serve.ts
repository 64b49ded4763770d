/**
 * The admin API and panel listening: one Bun.serve on --admin-host and
 * --admin-port, with a warning when that is beyond this machine in clear
 * text.
 */
import type { Server } from "bun";
import { log } from "../log.ts";
import type { AdminApp } from "./app.ts";

/** Listens; throws when the port is taken (a second server must fail, not share it). */
export function serveAdmin(app: AdminApp, where: { host: string; port: number }): { server: Server<undefined>; url: string } {
  const server = Bun.serve({
    hostname: where.host,
    port: where.port,
    reusePort: false, // a second server on the same port must fail, not share it
    development: false, // the panel's HTML import: bundled once and cached, no hot reload
    routes: app.routes,
    fetch: app.fetch,
    error(err) {
      log.error("admin server error", { err: String(err) });
      return Response.json({ error: "internal server error" }, { status: 500 });
    },
  });
  if (!isLoopback(where.host)) {
    log.warn("the admin API listens beyond this machine in clear text: passwords and session cookies cross the network unencrypted; prefer the default --admin-host 127.0.0.1 with an SSH tunnel or a TLS proxy", { admin_host: where.host });
  }
  return { server, url: `http://${displayHost(where.host)}:${server.port}` };
}

function isLoopback(host: string): boolean {
  return host === "localhost" || host === "::1" || host === "[::1]" || /^127\./.test(host);
}

function displayHost(host: string): string {
  if (host === "0.0.0.0" || host === "::") return "127.0.0.1";
  return host.includes(":") ? `[${host}]` : host;
}
