/** The rules of burrow in one object, used by the admin API and the edge alike. */
import type { Store } from "../db/store.ts";
import { createAdminKeys } from "./admin-keys.ts";
import { createAudit } from "./audit.ts";
import { systemClock, type Clock } from "./clock.ts";
import { createDomains } from "./domains.ts";
import { createHostnames, type TxtLookup } from "./hostnames.ts";
import { noLiveTunnels, type LiveTunnels } from "./live.ts";
import { createSessions } from "./sessions.ts";
import { LoginThrottle } from "./login-throttle.ts";
import { createTokenConfigs } from "./token-configs.ts";
import { createTokens } from "./tokens.ts";
import { createDeviceLogin } from "./device-login.ts";
import { createInvitations } from "./invitations.ts";
import { createPrivateShares } from "./private-shares.ts";
import { createTraffic } from "./traffic.ts";
import { createTrafficPolicies } from "./traffic-policies.ts";
import { createUsers } from "./users.ts";

export interface CoreOptions {
  store: Store;
  clock?: Clock;
  /** Names nobody may reserve or open a tunnel on. */
  systemSubdomains: readonly string[];
  /** The server's own domain: custom hostnames may not be under it. */
  domain?: string;
  /** How a custom hostname's TXT record is looked up (the server's resolver); none: verifying says it cannot look. */
  lookupTxt?: TxtLookup;
  /** How long a device login's code waits for approval (default 10 minutes). */
  deviceCodeTtlMs?: number;
}

export type Core = ReturnType<typeof createCore>;

const noLookup: TxtLookup = () => Promise.reject(new Error("this server looks up no DNS"));

export function createCore({ store, clock = systemClock, systemSubdomains, domain = "", lookupTxt = noLookup, deviceCodeTtlMs }: CoreOptions) {
  // filled in once the edge's registry exists; admin actions reach live tunnels through it
  let attached: LiveTunnels = noLiveTunnels;
  const live: LiveTunnels = {
    list: () => attached.list(),
    closeUser: (...a) => attached.closeUser(...a),
    closeToken: (...a) => attached.closeToken(...a),
    // never rejects: an admin's change is made whatever its live effect (which logs its own failures)
    rulesChanged: (change) => attached.rulesChanged?.(change).catch(() => {}) ?? Promise.resolve(),
    configChanged: (tokenId) => attached.configChanged?.(tokenId),
    agents: () => attached.agents?.() ?? [],
    askAgent: (id, action) => attached.askAgent?.(id, action) ?? Promise.resolve({ found: false }),
  };
  const clockNow = () => clock.now().getTime();
  const tokens = createTokens(store, clock, live);
  const users = createUsers(store, clock, live);
  const hostnames = createHostnames(store, clock, domain, lookupTxt);
  const domains = createDomains(store, clock, systemSubdomains);
  return {
    store,
    clock,
    users,
    invitations: createInvitations(store, clock, users),
    trafficPolicies: createTrafficPolicies(store, clock, domain),
    privateShares: createPrivateShares(store, clock, users),
    tokens,
    tokenConfigs: createTokenConfigs(store, clock, tokens, live),
    deviceLogin: createDeviceLogin(store, clock, tokens, deviceCodeTtlMs),
    // the writes that can narrow what live tunnels may have: what is live is judged again before they answer
    domains: {
      ...domains,
      async reserve(...a: Parameters<typeof domains.reserve>) {
        const reserved = await domains.reserve(...a);
        await live.rulesChanged!({ subdomain: reserved.subdomain });
        return reserved;
      },
    },
    hostnames: {
      ...hostnames,
      async create(...a: Parameters<typeof hostnames.create>) {
        const made = await hostnames.create(...a);
        await live.rulesChanged!({ hostname: made.hostname });
        return made;
      },
      async verify(...a: Parameters<typeof hostnames.verify>) {
        const verified = await hostnames.verify(...a);
        await live.rulesChanged!({ hostname: verified.hostname });
        return verified;
      },
      async remove(...a: Parameters<typeof hostnames.remove>) {
        const gone = await hostnames.remove(...a);
        await live.rulesChanged!({ hostname: gone.hostname });
        return gone;
      },
    },
    sessions: createSessions(store, clock),
    adminKeys: createAdminKeys(store, clock),
    audit: createAudit(store, clock),
    traffic: createTraffic(store, clock),
    loginThrottle: new LoginThrottle(clockNow),
    /** Connects admin actions to whatever holds live tunnels. */
    live,
    attachLiveTunnels(impl: LiveTunnels) {
      attached = impl;
    },
  };
}
