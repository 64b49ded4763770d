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
import { createSshKeys } from "./ssh-keys.ts";
import { createTokenConfigs } from "./token-configs.ts";
import { createTokens } from "./tokens.ts";
import { createDeviceLogin } from "./device-login.ts";
import { createInvitations } from "./invitations.ts";
import { createPrivateShares } from "./private-shares.ts";
import { createTraffic } from "./traffic.ts";
import { createTrafficPolicies } from "./traffic-policies.ts";
import { createUsers } from "./users.ts";
import { createOutbox, DEFAULT_OUTBOX_SETTINGS, type OutboxSettings } from "./events/outbox.ts";
import { createWebhooks, DEFAULT_WEBHOOK_LIMITS, type WebhookLimits } from "./events/webhooks.ts";

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
  /** The outbox's settings (--webhook-retry-window, --events-queue). */
  outbox?: OutboxSettings;
  /** The webhooks' caps (--webhooks-max, --webhooks-per-user). */
  webhookLimits?: WebhookLimits;
}

export type Core = ReturnType<typeof createCore>;

const noLookup: TxtLookup = () => Promise.reject(new Error("this server looks up no DNS"));

export function createCore({ store, clock = systemClock, systemSubdomains, domain = "", lookupTxt = noLookup, deviceCodeTtlMs, outbox: outboxSettings = DEFAULT_OUTBOX_SETTINGS, webhookLimits = DEFAULT_WEBHOOK_LIMITS }: CoreOptions) {
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
  // events are written in the transaction of the change that causes them (core/events/outbox.ts)
  const events = createOutbox(store, clock, outboxSettings);
  const tokens = createTokens(store, clock, live, events.emit);
  const sshKeys = createSshKeys(store, clock, live);
  const users = createUsers(store, clock, live, events.emit);
  const hostnames = createHostnames(store, clock, domain, lookupTxt, events.emit);
  const loginThrottle = new LoginThrottle(clockNow);
  loginThrottle.onBurst = (b) =>
    events.later({ type: "login.failed_burst", data: { address: b.address, username: b.username.slice(0, 200), failures: b.failures, locked_for_s: b.lockedForS } });
  const domains = createDomains(store, clock, systemSubdomains);
  return {
    store,
    clock,
    users,
    invitations: createInvitations(store, clock, users),
    trafficPolicies: createTrafficPolicies(store, clock, domain),
    privateShares: createPrivateShares(store, clock, users),
    // a token revoked takes the SSH keys added with it along (`burrow keys add`)
    tokens: {
      ...tokens,
      async revoke(...a: Parameters<typeof tokens.revoke>) {
        await tokens.revoke(...a);
        await sshKeys.removeAddedBy(a[0]);
      },
      async revokeOwn(...a: Parameters<typeof tokens.revokeOwn>) {
        const row = await tokens.revokeOwn(...a);
        await sshKeys.removeAddedBy(row.id);
        return row;
      },
    },
    sshKeys,
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
    events,
    webhooks: createWebhooks(store, clock, webhookLimits),
    sessions: createSessions(store, clock),
    adminKeys: createAdminKeys(store, clock),
    audit: createAudit(store, clock),
    traffic: createTraffic(store, clock),
    loginThrottle,
    /** Connects admin actions to whatever holds live tunnels. */
    live,
    attachLiveTunnels(impl: LiveTunnels) {
      attached = impl;
    },
  };
}
