/** Live quota enforcement: a user past their traffic limit loses their tunnels. */
import type { Core } from "../core/index.ts";
import { log } from "../log.ts";
import type { TrafficMeter } from "./meter.ts";
import type { Registry } from "./registry.ts";

export async function enforceQuotas(core: Core, registry: Registry, meter: TrafficMeter): Promise<void> {
  for (const userId of registry.liveUsers()) {
    let user;
    try {
      user = await core.users.get(userId);
    } catch {
      continue;
    }
    if (user.trafficLimit <= 0) continue;
    const used = (await core.traffic.usedInPeriod(user)) + meter.unflushed(userId);
    if (used >= user.trafficLimit) {
      log.info("traffic quota reached, closing tunnels", { user: user.username, used, limit: user.trafficLimit });
      registry.closeUser(userId, "TRAFFIC_EXCEEDED", `the traffic quota of ${user.trafficLimit} bytes for this ${user.trafficPeriod} period is used up`);
    }
  }
}
