/** The first admin: made on a start that finds no admin in the database. */
import { log, logFormat } from "../log.ts";
import * as v from "valibot";
import { describeIssues, password as passwordRule, username as usernameRule } from "../validate/fields.ts";
import { AppError } from "./errors.ts";
import type { Core } from "./index.ts";
import { verifyPassword } from "./passwords.ts";
import { randomBase62 } from "./secrets.ts";

export const DEFAULT_ADMIN_USERNAME = "admin";

export class BootstrapError extends Error {}

/**
 * Creates the admin from BURROW_ADMIN_USERNAME / BURROW_ADMIN_PASSWORD; with
 * no password given it generates one and prints it, once.
 *
 * The two are read on a first start only, but checked on every start: a
 * value the server would not take stops it (never a start that looks as if
 * it took a password it did not), and a password that is no longer the
 * admin's (changed since in the panel, say) is said in a warning, since
 * whoever set it may believe it is the one that signs in.
 */
export async function ensureAdmin(core: Core, env: Record<string, string | undefined>): Promise<void> {
  const username = env.BURROW_ADMIN_USERNAME || DEFAULT_ADMIN_USERNAME;
  const given = env.BURROW_ADMIN_PASSWORD;
  const name = v.safeParse(usernameRule, username);
  if (!name.success) throw new BootstrapError(`BURROW_ADMIN_USERNAME ${describeIssues(name.issues)}`);
  if (given !== undefined && given !== "") {
    const pw = v.safeParse(passwordRule, given);
    if (!pw.success) throw new BootstrapError(`BURROW_ADMIN_PASSWORD ${describeIssues(pw.issues)}`);
  }
  const hasAdmin = (await core.users.list()).some((u) => u.role === "admin");
  if (hasAdmin) {
    if (given) await warnIfStale(core, username, given);
    return;
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

/** BURROW_ADMIN_PASSWORD is set on a later start: a warning when it does not sign `username` in as an admin now. */
async function warnIfStale(core: Core, username: string, given: string): Promise<void> {
  const user = await core.users.byName(username);
  const signsIn = user !== undefined && user.role === "admin" && user.enabled && user.passwordHash !== "" && (await verifyPassword(user.passwordHash, given));
  if (signsIn) return;
  log.warn("BURROW_ADMIN_PASSWORD is set but does not sign in an admin: it is read on a first start only, with no admin yet; change a password in the panel or with PUT /api/users/:id, and remove it from the environment", { username });
}
