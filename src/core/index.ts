/** The rules of burrow in one object, used by the admin API and the edge alike. */
import type { Db } from "../db/open.ts";
import { createAdminKeys } from "./admin-keys.ts";
import { createAudit } from "./audit.ts";
import { systemClock, type Clock } from "./clock.ts";
import { createDomains } from "./domains.ts";
import { noLiveTunnels, type LiveTunnels } from "./live.ts";
import { createSessions } from "./sessions.ts";
import { LoginThrottle } from "./login-throttle.ts";
import { createTokens } from "./tokens.ts";
import { createTraffic } from "./traffic.ts";
import { createUsers } from "./users.ts";

export interface CoreOptions {
  db: Db;
  clock?: Clock;
  /** Names nobody may reserve or open a tunnel on. */
  systemSubdomains: readonly string[];
}

export type Core = ReturnType<typeof createCore>;

export function createCore({ db, clock = systemClock, systemSubdomains }: CoreOptions) {
  // filled in once the edge's registry exists; admin actions reach live tunnels through it
  let attached: LiveTunnels = noLiveTunnels;
  const live: LiveTunnels = {
    list: () => attached.list(),
    closeUser: (...a) => attached.closeUser(...a),
    closeToken: (...a) => attached.closeToken(...a),
    userAccessChanged: (user) => attached.userAccessChanged?.(user),
  };
  const clockNow = () => clock.now().getTime();
  return {
    clock,
    users: createUsers(db, clock, live),
    tokens: createTokens(db, clock, live),
    domains: createDomains(db, clock, systemSubdomains),
    sessions: createSessions(db, clock),
    adminKeys: createAdminKeys(db, clock),
    audit: createAudit(db, clock),
    traffic: createTraffic(db, clock),
    loginThrottle: new LoginThrottle(clockNow),
    /** Connects admin actions to whatever holds live tunnels. */
    live,
    attachLiveTunnels(impl: LiveTunnels) {
      attached = impl;
    },
  };
}
