/** What every admin route handler receives. */
import type { BunRequest } from "bun";
import type { AuditAction, AuditActor } from "../core/audit.ts";
import type { Core } from "../core/index.ts";
import type { UserRow } from "../db/schema.ts";
import type { OperationDoc } from "./openapi.ts";

export interface RequestContext {
  core: Core;
  /** The signed-in admin; absent only on login. */
  admin: UserRow;
  /** The client's address, for throttling and logs. */
  address: string;
  /** The admin API key the request was authenticated with; undefined for a session. */
  keyId?: number;
  /** What the handler adds to its route's audit entry (the wrapper writes it, whatever the outcome). */
  audit: AuditNote;
}

/** A handler's part of its audit entry. Never a password, a secret or a hash. */
export interface AuditNote {
  /** What was acted on, e.g. "user:5". */
  target?: string;
  details?: Record<string, unknown>;
  /** Who acted, when it is not the signed-in admin: login's user, or the username a failed login tried. */
  actor?: AuditActor;
}

export type Method = "GET" | "POST" | "PUT" | "DELETE";

export type Handler = (req: BunRequest<string>, ctx: RequestContext) => Response | Promise<Response>;

/** A route: its handlers by method, whether it needs a session, its audit actions and its documentation. */
export interface Route {
  path: string;
  methods: Partial<Record<Method, Handler>>;
  public?: boolean;
  /** The audit log's action for each state-changing method (every POST, PUT and DELETE has one). */
  audit?: Partial<Record<Method, AuditAction>>;
  /** Each method in the OpenAPI document (GET /api/openapi.json); a route without it fails the coverage test. */
  docs?: Partial<Record<Method, OperationDoc>>;
}
