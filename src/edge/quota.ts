/**
 * Live quota enforcement: a user past their traffic limit loses their tunnels.
 *
 * While the database does not answer, quotas are not enforced: the tunnels
 * keep running on what was last known, nothing is closed because of the
 * outage, and each user is checked again by the first round after the
 * database is back (rounds run every second). The edge says so once every
 * 10 s meanwhile, so an outage is a few lines, not one per user per second.
 */
import { AppError } from "../core/errors.ts";
import type { Core } from "../core/index.ts";
import type { UserRow } from "../db/schema.ts";
import { databaseUnavailable } from "../db/unavailable.ts";
import { log, quietWarnings } from "../log.ts";
import type { TrafficMeter } from "./meter.ts";
import type { Registry } from "./registry.ts";
import type { EdgeEvents } from "./edge-events.ts";

/** A check that failed is said at most this often (the checks run every second). */
const SAY_EVERY_MS = 10_000;
/** The database's outage: a warning. */
const outage = quietWarnings(SAY_EVERY_MS);
/** Anything else (a bug, data the code did not expect): an error, as rarely. */
const fault = quietWarnings(SAY_EVERY_MS, Date.now, "error");

export async function enforceQuotas(core: Core, registry: Registry, meter: TrafficMeter, events?: EdgeEvents): Promise<void> {
  for (const userId of registry.liveUsers()) {
    let user: UserRow;
    let used: number;
    try {
      user = await core.users.get(userId);
      if (user.trafficLimit <= 0) continue;
      used = (await core.traffic.usedInPeriod(user)) + meter.unflushed(userId);
    } catch (err) {
      // deleted meanwhile: the deletion closed its tunnels
      if (err instanceof AppError && err.code === "NOT_FOUND") continue;
      const unavailable = databaseUnavailable(err);
      (unavailable ? outage : fault)("quota", "traffic quota not checked: tunnels keep running until it can be", { user: userId, err: String(err) });
      // every user's check would wait on the same database: the next round asks again
      if (unavailable) return;
      continue;
    }
    events?.quota(user, used);
    if (used >= user.trafficLimit) {
      log.info("traffic quota reached, closing tunnels", { user: user.username, used, limit: user.trafficLimit });
      registry.closeUser(userId, "TRAFFIC_EXCEEDED", `the traffic quota of ${user.trafficLimit} bytes for this ${user.trafficPeriod} period is used up`);
    }
  }
}
