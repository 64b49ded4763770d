/**
 * How a portal request becomes its audit entry: the user behind it is the
 * actor. A failure no user is behind (a wrong password, a wrong device
 * code) is something anyone can repeat at will: counted per address, code,
 * tried username and minute instead of written row by row, as the admin
 * API's are (core/audit.ts repeated()).
 */
import { countAnonymousFailure } from "../api/audit-failure.ts";
import type { AuditAction, AuditOutcome } from "../core/audit.ts";
import type { Core } from "../core/index.ts";
import type { PortalContext } from "./context.ts";

/** Never rejects: core.audit counts and logs a write that failed. */
export async function recordPortalAudit(core: Core, action: AuditAction, ctx: PortalContext, outcome: AuditOutcome, code?: string): Promise<void> {
  const { target, details, actor } = ctx.audit;
  const known = actor?.userId !== undefined;
  // a portal entry is always someone's: signing out with no session is no one's act, and anyone's to repeat
  if (outcome === "ok") {
    if (!known) return;
    return core.audit.record({ action, address: ctx.address, outcome, code, ...actor, target, details: { via: "portal", ...details } });
  }
  if (known) {
    return core.audit.record({ action, address: ctx.address, outcome, code, ...actor, target, details: { via: "portal", ...details } });
  }
  countAnonymousFailure(core, action, ctx.address, code, actor?.username, outcome);
}
