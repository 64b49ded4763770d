/**
 * The admin API and panel alone, in this process: createAdminApp on a fresh
 * temp database behind Bun.serve on port 0, with the first admin made as the
 * server makes it. For what the real server cannot be given from outside,
 * such as a certificate report with chosen dates and failures. Use with
 * `await using`, or call stop().
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createAdminApp, type AdminAppOptions } from "../../src/admin/app.ts";
import { ensureAdmin } from "../../src/core/bootstrap.ts";
import { createCore } from "../../src/core/index.ts";
import { openDatabase } from "../../src/db/open.ts";
import { ADMIN_PASSWORD } from "./server.ts";

export interface InProcessAdmin extends AsyncDisposable {
  adminUrl: string;
  stop(): Promise<void>;
}

export async function startAdminApp(options: AdminAppOptions = {}): Promise<InProcessAdmin> {
  const dataDir = mkdtempSync(join(tmpdir(), "burrow-admin-app-"));
  const database = openDatabase(dataDir);
  const core = createCore({ store: database.store, systemSubdomains: [] });
  await ensureAdmin(core, { BURROW_ADMIN_USERNAME: "admin", BURROW_ADMIN_PASSWORD: ADMIN_PASSWORD });
  const app = createAdminApp(core, options);
  const server = Bun.serve({ hostname: "127.0.0.1", port: 0, development: false, routes: app.routes, fetch: app.fetch });
  let stopped: Promise<void> | undefined;
  const stop = () =>
    (stopped ??= (async () => {
      await server.stop(true);
      database.close();
      rmSync(dataDir, { recursive: true, force: true });
    })());
  return { adminUrl: `http://127.0.0.1:${server.port}`, stop, [Symbol.asyncDispose]: stop };
}
