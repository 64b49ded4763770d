/**
 * A failure no signed-in person is behind (a wrong password, a write without
 * a valid session) is something anyone can repeat at will: counted per
 * address, code, tried username and minute instead of written row by row
 * (core/audit.ts repeated()). The admin API's and the portal's entries alike.
 */
import type { AuditAction, AuditOutcome } from "../core/audit.ts";
import type { Core } from "../core/index.ts";

/** The longest tried username kept from a failed sign-in. */
const MAX_TRIED_NAME = 64;

export function countAnonymousFailure(core: Core, action: AuditAction, address: string, code: string | undefined, triedUsername: string | undefined, outcome: Exclude<AuditOutcome, "ok"> = "failed"): void {
  const tried = triedUsername?.slice(0, MAX_TRIED_NAME);
  core.audit.repeated({
    action,
    address,
    outcome,
    code: code ?? "INTERNAL",
    key: tried?.toLowerCase(),
    identify: async () => (tried === undefined ? undefined : { username: tried, userId: (await core.users.byName(tried))?.id }),
  });
}
