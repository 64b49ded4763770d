/** The first admin: made on a start that finds no admin in the database. */
import { log, logFormat } from "../log.ts";
import * as v from "valibot";
import { describeIssues, password as passwordRule, username as usernameRule } from "../validate/fields.ts";
import { AppError } from "./errors.ts";
import type { Core } from "./index.ts";
import { randomBase62 } from "./secrets.ts";

export const DEFAULT_ADMIN_USERNAME = "admin";

export class BootstrapError extends Error {}

/**
 * Creates the admin from BURROW_ADMIN_USERNAME / BURROW_ADMIN_PASSWORD; with
 * no password given it generates one and prints it, once.
 */
export async function ensureAdmin(core: Core, env: Record<string, string | undefined>): Promise<void> {
  const hasAdmin = (await core.users.list()).some((u) => u.role === "admin");
  if (hasAdmin) return;
  const username = env.BURROW_ADMIN_USERNAME || DEFAULT_ADMIN_USERNAME;
  const given = env.BURROW_ADMIN_PASSWORD;
  const name = v.safeParse(usernameRule, username);
  if (!name.success) throw new BootstrapError(`BURROW_ADMIN_USERNAME ${describeIssues(name.issues)}`);
  if (given !== undefined && given !== "") {
    const pw = v.safeParse(passwordRule, given);
    if (!pw.success) throw new BootstrapError(`BURROW_ADMIN_PASSWORD ${describeIssues(pw.issues)}`);
  }
  const password = given || randomBase62(24);
  const existing = await core.users.byName(username);
  if (existing) {
    // a plain user already has the name: promote them rather than fail to start
    await core.users.update(existing.id, { role: "admin", enabled: true, password });
  } else {
    try {
      await core.users.create({ username, password, role: "admin" });
    } catch (err) {
      // another node on the same database made it first (both found none): theirs stands
      if (err instanceof AppError && err.code === "USERNAME_TAKEN") return;
      throw err;
    }
  }
  log.info("created the first admin", { username });
  if (!given) {
    // the one secret burrow ever prints, on purpose and once: written past the logger's redaction,
    // as a banner in text and as one line in JSON (so that every line stays one object)
    if (logFormat() === "json") {
      console.log(JSON.stringify({ time: new Date().toISOString(), level: "warn", msg: "the first admin's generated password, shown only this once: sign in and keep it somewhere safe", username, generated_password: password }));
    } else {
      console.log(`\n  Admin user '${username}' created with password: ${password}\n  It is shown only this once; sign in and keep it somewhere safe.\n`);
    }
  }
}
