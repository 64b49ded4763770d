/** What every admin route handler receives. */
import type { BunRequest } from "bun";
import type { AuditAction, AuditActor } from "../core/audit.ts";
import type { Core } from "../core/index.ts";
import type { UserRow } from "../db/schema.ts";
import type { OperationDoc } from "../api/operation-doc.ts";

/** What a public route's handler receives (login, health, metrics, the OpenAPI document): no admin is known. */
export interface PublicContext {
  core: Core;
  /** The client's address, for throttling and logs. */
  address: string;
  /** What the handler adds to its route's audit entry (the wrapper writes it, whatever the outcome). */
  audit: AuditNote;
}

/** Who is behind a request to a route that is not public: the wrapper has checked them before the handler runs. */
export interface Authenticated {
  admin: UserRow;
  /** The admin API key the request was authenticated with; undefined for a session. */
  keyId?: number;
  /** The session's key the request was authenticated with; undefined for an API key. Never logged. */
  sessionKey?: string;
}

/** What every other route's handler receives. */
export type RequestContext = PublicContext & Authenticated;

/** A handler's part of its audit entry. Never a password, a secret or a hash. */
export interface AuditNote {
  /** What was acted on, e.g. "user:5". */
  target?: string;
  details?: Record<string, unknown>;
  /** Who acted, when it is not the signed-in admin: login's user, or the username a failed login tried. */
  actor?: AuditActor;
}

export type Method = "GET" | "POST" | "PUT" | "DELETE";

export type Handler<C = RequestContext> = (req: BunRequest<string>, ctx: C) => Response | Promise<Response>;

interface RouteCommon {
  path: string;
  /** The audit log's action for each state-changing method (every POST, PUT and DELETE has one). */
  audit?: Partial<Record<Method, AuditAction>>;
  /** Each method in the OpenAPI document (GET /api/openapi.json); a route without it fails the coverage test. */
  docs?: Partial<Record<Method, OperationDoc>>;
}

/** A route: its handlers by method, whether it needs a session (or key), its audit actions and its documentation. */
export type Route =
  | (RouteCommon & { public?: false; methods: Partial<Record<Method, Handler>> })
  | (RouteCommon & { public: true; methods: Partial<Record<Method, Handler<PublicContext>>> });
