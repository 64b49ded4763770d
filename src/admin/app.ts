/**
 * The admin API as Bun.serve routes, beside the web panel's pages. Each
 * handler is wrapped once: it gets the admin behind the request's API key
 * (Authorization: Bearer brk_...) or else its session cookie, whose
 * cross-site POST/PUT/DELETE is refused (csrf.ts), or the request answers
 * 401/403; a route's write is recorded in the audit log whatever its
 * outcome (audit.ts); and any AppError it throws becomes {"error": message}
 * with the code's status. A client that
 * left in the middle of its request (ClientGone) is no one's fault: nothing is
 * logged. Anything else is a bug: logged with context and answered with a
 * bare 500.
 */
import type { BunRequest, HTMLBundle, Server } from "bun";
import { NO_TLS, type CertificateReporter } from "../acme/report.ts";
import type { AuditAction, AuditOutcome } from "../core/audit.ts";
import { AppError, badRequest } from "../core/errors.ts";
import { parseHost, requestPath } from "../http/request-target.ts";
import type { Core } from "../core/index.ts";
import { databaseUnavailable, reportUnavailable, UNAVAILABLE_MESSAGE, UNAVAILABLE_RETRY_S } from "../db/unavailable.ts";
import { log, logStack } from "../log.ts";
import { authRoutes, readBearer, readSessionCookie } from "./auth.ts";
import { backupRoutes, type BackupSource } from "./backup.ts";
import { certificateRoutes } from "./certificates.ts";
import { auditRoutes, recordAudit, type AuditContext } from "./audit.ts";
import type { Handler, Method, PublicContext, Route } from "./context.ts";
import { checkCrossSite } from "../api/csrf.ts";
import { domainRoutes } from "./domains.ts";
import { hostnameRoutes } from "./hostnames.ts";
import { keyRoutes } from "./keys.ts";
import { invitationRoutes } from "./invitations.ts";
import { openApiRoutes } from "./openapi.ts";
import { policyRoutes } from "./policies.ts";
import type { PolicyLimits } from "../policy/index.ts";
import { ClientGone, errorResponse, json } from "../api/http.ts";
import { panelRoutes } from "./panel/serve.ts";
import { publicInfoRoutes, type PublicInfo } from "./public-info.ts";
import { statsRoutes } from "./stats.ts";
import { sshKeyRoutes } from "./ssh-keys.ts";
import { tokenRoutes } from "./tokens.ts";
import { tokenConfigRoutes } from "./token-configs.ts";
import { agentRoutes } from "./agents.ts";
import { userRoutes } from "./users.ts";
import { webhookRoutes } from "./webhooks.ts";

export const ROUTES: Route[] = [
  ...authRoutes,
  ...userRoutes,
  ...tokenRoutes,
  ...tokenConfigRoutes,
  ...sshKeyRoutes,
  ...agentRoutes,
  ...domainRoutes,
  ...hostnameRoutes,
  ...statsRoutes,
  ...auditRoutes,
  ...keyRoutes,
  ...webhookRoutes,
];

type BunHandler = (req: BunRequest<string>, server: Server<unknown>) => Promise<Response>;

const badHostError = () => badRequest("the Host header does not name a valid host");

export interface AdminApp {
  routes: Record<string, Record<string, BunHandler> | HTMLBundle>;
  fetch(req: Request, server: Server<unknown>): Response;
}

export interface AdminAppOptions {
  /** Where the public side is, for GET /api/server (the panel's login command and links). */
  publicInfo?: () => PublicInfo | undefined;
  /** The database POST /api/backup copies; without it (PostgreSQL) the route answers 409 BACKUP_UNAVAILABLE. */
  backup?: BackupSource;
  /** The public port's HTTPS, for GET /api/certificates; without it, mode "off". */
  certificates?: CertificateReporter;
  /** Routes beside the API, wrapped the same way: the operations endpoints (/metrics, /healthz, /readyz). */
  operations?: Route[];
  /** Where invitations are opened: the portal's address, or undefined when the portal is off (POST /api/invitations answers 409). */
  portalOrigin?: () => string | undefined;
  /** The server's caps on a traffic policy, which /api/policies loads documents under (as the edge does). */
  policyLimits?: Partial<PolicyLimits>;
  /** The server has a GeoIP database (--geoip-db): /api/policies takes policies that read conn.geo.*. */
  policyGeoip?: boolean;
  /** Told of every answer: the route's pattern ("unmatched" for none), method and status (the metrics' admin requests). */
  answered?: (route: string, method: string, status: number) => void;
}

export function createAdminApp(core: Core, options: AdminAppOptions = {}): AdminApp {
  const apiRoutes: Route[] = [
    ...ROUTES,
    ...publicInfoRoutes(options.publicInfo ?? (() => undefined)),
    ...backupRoutes(options.backup),
    ...certificateRoutes(options.certificates ?? NO_TLS),
    ...invitationRoutes(options.portalOrigin ?? (() => undefined)),
    ...policyRoutes(options.policyLimits, options.policyGeoip),
    // the whole table, operations included: read when the document is first asked for
    ...openApiRoutes(() => [...apiRoutes, ...operations].map((r: Route) => ({ path: r.path, methods: Object.keys(r.methods), public: r.public, docs: r.docs }))),
  ];

  /**
   * A route's handler as the wrapper calls it, once the request passed the
   * Host and cross-site checks: a public route's as it is; any other's after
   * the admin behind its API key, else its session cookie, is known (401 or
   * 403 otherwise), who is then noted for the audit entry too.
   */
  type Call = (req: BunRequest<string>, ctx: AuditContext, key: string | undefined) => Promise<Response>;
  const callPublic = (handler: Handler<PublicContext>): Call => async (req, ctx) => handler(req, ctx);
  const callAuthenticated =
    (handler: Handler): Call =>
    async (req, ctx, key) => {
      const sessionKey = key === undefined ? readSessionCookie(req) : undefined;
      const who = key !== undefined ? await core.adminKeys.authenticate(key) : { admin: await core.sessions.resolve(sessionKey), sessionKey };
      Object.assign(ctx, who);
      return handler(req, { ...ctx, ...who });
    };

  function wrap(route: Route, call: Call, action: AuditAction | undefined): BunHandler {
    return async (req, server) => {
      const address = server.requestIP(req)?.address ?? "unknown";
      // the admin is added once known; the handler's notes (ctx.audit) are shared with the entry
      const ctx: AuditContext = { core, address, audit: {} };
      // never rejects: a write the database refuses is counted and logged by core/audit.ts
      const audited = async (outcome: AuditOutcome, code?: string) => {
        if (action) await recordAudit(core, action, ctx, outcome, code);
      };
      try {
        if (!parseHost(req.headers.get("host")) || !URL.parse(req.url)) throw badHostError();
        const key = route.public ? undefined : readBearer(req);
        // a key is sent only by whoever holds it, never by a browser on its own: a request with a key
        // and no cookie at all skips the cross-site check; anything with a cookie takes it (csrf.ts)
        if (key === undefined || req.headers.get("cookie") !== null) {
          const refused = checkCrossSite(req);
          if (refused) throw refused;
        }
        const response = await call(req, ctx, key);
        await audited("ok");
        return response;
      } catch (err) {
        if (err instanceof AppError) {
          await audited("failed", err.code);
          return errorResponse(err);
        }
        // Bun writes nothing on a closed connection: this response only ends the handler
        if (err instanceof ClientGone) return new Response(null, { status: 400 });
        if (databaseUnavailable(err)) {
          reportUnavailable(`${req.method} ${requestPath(req)?.pathname ?? "?"}`, err);
          await audited("failed", "DATABASE_UNAVAILABLE"); // written if the database takes it
          return errorResponse(new AppError("DATABASE_UNAVAILABLE", UNAVAILABLE_MESSAGE, { "Retry-After": String(UNAVAILABLE_RETRY_S) }));
        }
        await audited("failed", "INTERNAL");
        log.error("admin request failed", { method: req.method, path: requestPath(req)?.pathname, err: String(err) });
        if (err instanceof Error && err.stack) logStack(err);
        return json({ error: "internal server error" }, 500);
      }
    };
  }

  const operations = options.operations ?? [];
  const routes: AdminApp["routes"] = { ...panelRoutes };
  for (const route of [...apiRoutes, ...operations]) {
    const action = (method: string) => route.audit?.[method as Method];
    routes[route.path] = Object.fromEntries(
      route.public
        ? Object.entries(route.methods).map(([method, handler]) => [method, wrap(route, callPublic(handler), action(method))])
        : Object.entries(route.methods).map(([method, handler]) => [method, wrap(route, callAuthenticated(handler), action(method))]),
    );
  }

  const answered = options.answered;
  if (answered) {
    for (const route of [...apiRoutes, ...operations]) {
      const handlers = routes[route.path] as Record<string, BunHandler>;
      for (const [method, handler] of Object.entries(handlers)) {
        handlers[method] = async (req, server) => {
          const res = await handler(req, server);
          answered(route.path, method, res.status);
          return res;
        };
      }
    }
  }

  // paths as patterns, to tell "no such path" (404) from "no such method here" (405)
  const patterns = [...apiRoutes, ...operations].map((r) => ({
    regex: new RegExp(`^${r.path.replace(/:[a-z_]+/g, "[^/]+")}$`),
    allow: Object.keys(r.methods).join(", "),
  }));

  return {
    routes,
    fetch(req) {
      const res = unmatched(req);
      answered?.("unmatched", req.method, res.status);
      return res;
    },
  };

  /** No route took the request: 405 on a known path, 404 on any other, 400 for a Host that names none. */
  function unmatched(req: Request): Response {
    const path = parseHost(req.headers.get("host")) ? requestPath(req)?.pathname : undefined;
    if (path === undefined) return errorResponse(badHostError());
    const known = patterns.find((p) => p.regex.test(path));
    if (known) {
      return errorResponse(new AppError("METHOD_NOT_ALLOWED", `method ${req.method} is not allowed on ${path}`, { Allow: known.allow }));
    }
    return errorResponse(new AppError("NOT_FOUND", `no such endpoint: ${req.method} ${path}`));
  }
}
