/**
 * The server's housekeeping of the database: expired sessions and device
 * codes swept every hour, audit entries older than --audit-days pruned
 * every day. Each runs once at start, before the server says it is ready.
 * A failure is logged and tried again at the next round: nothing else
 * depends on it.
 */
import { logFailedWrite } from "../db/unavailable.ts";
import { log } from "../log.ts";
import type { Core } from "./index.ts";

const SESSION_SWEEP_MS = 60 * 60 * 1000;
const AUDIT_PRUNE_MS = 24 * 60 * 60 * 1000;

/** Runs each chore once, then on its interval; returns how to stop them. */
export async function startHousekeeping(core: Core, auditDays: number): Promise<() => void> {
  const sweepSessions = () =>
    Promise.all([
      core.sessions.sweep().catch((err) => logFailedWrite("expired sessions not swept", {}, err)),
      core.deviceLogin.sweep().catch((err) => logFailedWrite("expired device codes not swept", {}, err)),
    ]);
  await sweepSessions();
  const sweeper = setInterval(sweepSessions, SESSION_SWEEP_MS);
  sweeper.unref();
  const pruneAudit = async () => {
    try {
      const pruned = await core.audit.prune(auditDays);
      if (pruned > 0) log.info("audit log pruned", { entries: pruned, older_than_days: auditDays });
    } catch (err) {
      logFailedWrite("audit log not pruned", {}, err); // tried again tomorrow; nothing else depends on it
    }
  };
  await pruneAudit();
  const auditPruner = setInterval(pruneAudit, AUDIT_PRUNE_MS);
  auditPruner.unref();
  return () => {
    clearInterval(sweeper);
    clearInterval(auditPruner);
  };
}
