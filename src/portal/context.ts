/** What every portal route handler receives, and the route table's types. */
import type { AuditAction } from "../core/audit.ts";
import type { Core } from "../core/index.ts";
import type { UserRow } from "../db/schema.ts";
import type { OperationDoc } from "../api/operation-doc.ts";

/** A handler's part of its audit entry. Never a password, a secret or a hash. */
export interface PortalAuditNote {
  /** What was acted on, e.g. "token:5". */
  target?: string;
  details?: Record<string, unknown>;
  /** Who acted, before a session says it: login's user, or the username a failed login tried. */
  actor?: { userId?: number; username?: string };
  /** The handler answered with a refusal of its own (a page, not an error): the entry is "refused" with this code. */
  refused?: "FORBIDDEN";
}

export interface PortalContext {
  core: Core;
  /** The client's address (a trusted proxy's client), for throttling, audit and logs. */
  address: string;
  /** Whether visitors reach the portal over HTTPS (the edge's TLS or a proxy's): the cookie's name and Secure. */
  secure: boolean;
  /** The portal's own address, e.g. https://tunnels.example.com (the links it gives out). */
  origin: string;
  audit: PortalAuditNote;
  /** The path's parameters (":id"). */
  params: Record<string, string>;
}

/** A route's handler once its user is known (every route but the public ones). */
export interface SignedIn extends PortalContext {
  user: UserRow;
  /** The session's key, from its cookie. */
  sessionKey: string;
}

export type PortalMethod = "GET" | "POST" | "PUT" | "DELETE";

interface RouteCommon {
  path: string;
  /** The audit log's action for each state-changing method. */
  audit?: Partial<Record<PortalMethod, AuditAction>>;
  docs?: Partial<Record<PortalMethod, OperationDoc>>;
}

export type PortalRoute =
  | (RouteCommon & { public?: false; methods: Partial<Record<PortalMethod, (req: Request, ctx: SignedIn) => Promise<Response>>> })
  | (RouteCommon & { public: true; methods: Partial<Record<PortalMethod, (req: Request, ctx: PortalContext) => Promise<Response>>> });
