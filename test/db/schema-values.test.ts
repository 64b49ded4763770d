/**
 * A column that holds one of a few words holds the words the code writes:
 * each such column's list in schema.ts and schema-pg.ts (drizzle's `enum`,
 * which types the rows and is not a database constraint, so a list short of
 * a word still stores it, and reads it back typed as something it is not)
 * equals the code's own list, read at run time where the code has one and
 * by the type checker where it has a type only. live_tunnels.protocol said
 * "http" | "tcp" while the cluster wrote tls and udp there.
 */
import { describe, expect, test } from "bun:test";
import type { Column } from "drizzle-orm";
import * as lite from "../../src/db/schema.ts";
import * as pg from "../../src/db/schema-pg.ts";
import { PROTOCOLS, ROLES, TRAFFIC_PERIODS } from "../../src/validate/fields.ts";
import { TunnelRequest } from "../../src/protocol/messages.ts";
import type { TunnelProtocol } from "../../src/edge/registry.ts";
import type { PrivateProtocol } from "../../src/core/private-shares.ts";
import type { PoolBalance } from "../../src/core/admission.ts";
import type { AuditOutcome } from "../../src/core/audit.ts";
import type { SessionKind } from "../../src/core/sessions.ts";
import { DELIVERY_STATUSES, WEBHOOK_ORIGINS } from "../../src/core/events/webhooks.ts";

/** The tunnel kinds a HELLO may ask for, and those of them that may be private, as the wire schema reads them. */
const requestKinds = TunnelRequest.options.map((o) => ({ kind: o.entries.protocol.literal, canBePrivate: "private" in o.entries, entries: o.entries as Record<string, unknown> }));
const balances = requestKinds.flatMap((k) => ((k.entries.balance as { wrapped?: { options?: string[] } } | undefined)?.wrapped?.options ?? []));

const columns: [string, (schema: typeof lite | typeof pg) => Column, readonly string[]][] = [
  ["live_tunnels.protocol: every tunnel kind", (s) => s.liveTunnels.protocol, PROTOCOLS],
  ["live_tunnels.protocol: every kind a HELLO may ask for", (s) => s.liveTunnels.protocol, requestKinds.map((k) => k.kind)],
  ["private_names.protocol: the kinds that may be private", (s) => s.privateNames.protocol, requestKinds.filter((k) => k.canBePrivate).map((k) => k.kind)],
  ["live_tunnels.pool: a pool's balances", (s) => s.liveTunnels.pool, [...new Set(balances)]],
  ["users.role", (s) => s.users.role, ROLES],
  ["users.traffic_period", (s) => s.users.trafficPeriod, TRAFFIC_PERIODS],
  ["webhook_deliveries.status", (s) => s.webhookDeliveries.status, DELIVERY_STATUSES],
  ["webhooks.origin", (s) => s.webhooks.origin, WEBHOOK_ORIGINS],
];

describe("the columns' word lists are the code's", () => {
  test("the wire schema's lists were read (a reshaped schema fails here, not silently below)", () => {
    expect(requestKinds.length).toBeGreaterThan(1);
    expect(requestKinds.some((k) => k.canBePrivate)).toBe(true);
    expect(balances.length).toBeGreaterThan(0);
  });

  for (const [what, column, words] of columns) {
    test(what, () => {
      const sorted = (xs: readonly string[] | undefined) => [...(xs ?? [])].sort();
      expect({ sqlite: sorted(column(lite).enumValues) }).toEqual({ sqlite: sorted(words) });
      expect({ postgresql: sorted(column(pg).enumValues) }).toEqual({ postgresql: sorted(words) });
    });
  }

  test("the rows' types are the code's types", () => {
    // checked by the type checker: a list that differs from the code's type makes its line `false`
    type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
    type Live = typeof lite.liveTunnels.$inferSelect;
    const agree: [
      Same<Live["protocol"], TunnelProtocol>,
      Same<typeof lite.privateNames.$inferSelect["protocol"], PrivateProtocol>,
      Same<NonNullable<Live["pool"]>, PoolBalance>,
      Same<typeof lite.auditLog.$inferSelect["outcome"], AuditOutcome>,
      Same<typeof lite.sessions.$inferSelect["kind"], SessionKind>,
    ] = [true, true, true, true, true];
    expect(agree.every((a) => a)).toBe(true);
  });
});
