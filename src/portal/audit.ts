/**
 * How a portal request becomes its audit entry: the user behind it is the
 * actor. A failure no user is behind (a wrong password, a wrong device
 * code) is something anyone can repeat at will: counted per address, code,
 * tried username and minute instead of written row by row, as the admin
 * API's are (core/audit.ts repeated()).
 */
import type { AuditAction, AuditOutcome } from "../core/audit.ts";
import type { Core } from "../core/index.ts";
import type { PortalContext } from "./context.ts";

/** The longest tried username kept from a failed login. */
const MAX_TRIED_NAME = 64;

/** Never rejects: core.audit counts and logs a write that failed. */
export async function recordPortalAudit(core: Core, action: AuditAction, ctx: PortalContext, outcome: AuditOutcome, code?: string): Promise<void> {
  const { target, details, actor } = ctx.audit;
  const known = actor?.userId !== undefined;
  // a portal entry is always someone's: signing out with no session is no one's act, and anyone's to repeat
  if (outcome === "ok" && !known) return;
  if (known) {
    return core.audit.record({ action, address: ctx.address, outcome, code, ...actor, target, details: { via: "portal", ...details } });
  }
  const tried = actor?.username?.slice(0, MAX_TRIED_NAME);
  core.audit.repeated({
    action,
    address: ctx.address,
    outcome,
    code: code ?? "INTERNAL",
    key: tried?.toLowerCase(),
    identify: async () => (tried === undefined ? undefined : { username: tried, userId: (await core.users.byName(tried))?.id }),
  });
}
