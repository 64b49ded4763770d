/**
 * GET /api/audit, and how an admin request becomes its audit entry: the
 * wrapper in app.ts calls recordAudit() after every request to a route
 * method with an audit action, whatever its outcome, with what the handler
 * noted (ctx.audit). A request no admin is behind (a failed login, a write
 * without a valid session or key) is something anyone can repeat at will:
 * it is counted per address, code, tried username and minute instead of
 * written row by row (core/audit.ts repeated()).
 */
import { DEFAULT_AUDIT_LIMIT, type AuditAction, type AuditOutcome } from "../core/audit.ts";
import { countAnonymousFailure } from "../api/audit-failure.ts";
import type { Core } from "../core/index.ts";
import type { AuditRow } from "../db/schema.ts";
import type { Authenticated, PublicContext, Route } from "./context.ts";
import { json, parseQuery } from "../api/http.ts";
import { AuditEntryJson, EntryList } from "../api/responses.ts";
import { AuditQuery } from "./schemas.ts";

/** A request as its audit entry sees it: the admin behind it once known (never, on a public route or before authentication). */
export type AuditContext = PublicContext & Partial<Authenticated>;

/** Never rejects: core.audit counts and logs a write that failed (burrow_audit_write_failures_total). */
export async function recordAudit(core: Core, action: AuditAction, ctx: AuditContext, outcome: AuditOutcome, code?: string): Promise<void> {
  const { target, details, actor } = ctx.audit;
  if (ctx.admin) {
    const who = { userId: ctx.admin.id, username: ctx.admin.username, keyId: ctx.keyId };
    return core.audit.record({ action, address: ctx.address, outcome, code, ...who, target, details });
  }
  if (outcome === "ok") return core.audit.record({ action, address: ctx.address, outcome, ...actor, target, details });
  countAnonymousFailure(core, action, ctx.address, code, actor?.username, outcome);
}

export const auditEntryJson = (e: AuditRow) => ({
  id: e.id,
  at: e.at,
  user_id: e.userId,
  username: e.username,
  key_id: e.keyId,
  token_id: e.tokenId,
  address: e.address,
  action: e.action,
  target: e.target,
  outcome: e.outcome,
  code: e.code,
  details: e.details === null ? null : (JSON.parse(e.details) as Record<string, unknown>),
  count: e.count,
});

export const auditRoutes: Route[] = [
  {
    path: "/api/audit",
    methods: {
      async GET(req, { core }) {
        const q = parseQuery(req, AuditQuery);
        const entries = await core.audit.list({ limit: q.limit ?? DEFAULT_AUDIT_LIMIT, beforeId: q.before_id, userId: q.user_id, action: q.action });
        return json(entries.map(auditEntryJson));
      },
    },
    docs: {
      GET: {
        summary: "The audit log, newest first",
        description:
          "Admin writes (signing in and out included) and refused agent handshakes. Page with before_id: the id of the last entry of the previous page. Refusals and failed sign-ins that repeat are one entry per address, code and minute, with a count.",
        query: AuditQuery,
        responses: { 200: { description: "Entries, newest first", schema: EntryList(AuditEntryJson) } },
      },
    },
  },
];
