/**
 * The portal: users' own face on the server's domain itself (the apex),
 * served over the edge's public port. Its API lives under /_burrow/api/ and
 * the device login's under /_burrow/device/; every other GET is its page.
 *
 * Each request passes, in this order:
 * 1. Host: the domain itself, nothing else. The edge hands an apex
 *    connection over for good, and a client may send another Host on it;
 *    such a request is 421, never a tunnel's and never the portal's.
 * 2. Cross-site writes refused as the admin API refuses them (api/csrf.ts):
 *    a tunnel's page is same-site to the portal, so Origin decides.
 * 3. The session (cookie.ts) for every route but the public ones. A portal
 *    session is of the portal only: it never works on the admin API, and no
 *    admin power is reachable here, whoever the user is.
 * 4. The handler; its write is audited with the user as actor, whatever the
 *    outcome; an AppError becomes {"error": message} with its status.
 */
import { checkCrossSite } from "../api/csrf.ts";
import { ClientGone, errorResponse, json } from "../api/http.ts";
import { AppError } from "../core/errors.ts";
import type { Core } from "../core/index.ts";
import { databaseUnavailable, reportUnavailable, UNAVAILABLE_MESSAGE, UNAVAILABLE_RETRY_S } from "../db/unavailable.ts";
import { parseHost, requestPath } from "../http/request-target.ts";
import { log, logStack } from "../log.ts";
import { recordPortalAudit } from "./audit.ts";
import { authRoutes } from "./auth.ts";
import type { PortalContext, PortalMethod, PortalRoute, SignedIn } from "./context.ts";
import { clearTossed, readSessionCookie } from "./cookie.ts";
import { deviceRoutes } from "./device-login.ts";
import { invitationRoutes } from "./invitations.ts";
import { meRoutes, type AddressOf } from "./me.ts";
import { sshKeyRoutes, type SshGatewayFacts } from "./ssh-keys.ts";
import { webhookRoutes } from "./webhooks.ts";
import { deviceConfigRoutes } from "./device-configs.ts";
import { portalOidcRoutes, type PortalOidcSettings } from "./oidc.ts";
import { pageFile } from "./page.ts";
import { SECURITY_HEADERS } from "../http/security-headers.ts";

/** The portal's API, every route (the reference and the tests read it). */
export const portalRoutes = (addressOf: AddressOf, oidc?: PortalOidcSettings, host: () => string = () => "", ssh: () => SshGatewayFacts | undefined = () => undefined): PortalRoute[] => [
  ...authRoutes,
  ...meRoutes(addressOf),
  ...deviceConfigRoutes,
  ...sshKeyRoutes(ssh, host),
  ...webhookRoutes,
  ...deviceRoutes,
  ...invitationRoutes,
  ...portalOidcRoutes(oidc, host),
];

/** What the edge knows of a request it handed over. */
export interface PortalVisit {
  /** Who it is (a trusted proxy's client, or the peer's address). */
  client: string;
  /** Through a trusted proxy, which pools its connections over every name. */
  proxied: boolean;
}

export interface PortalApp {
  fetch(req: Request, visit: PortalVisit): Promise<Response>;
}

export interface PortalOptions {
  /** The server's domain: the portal answers on it alone. */
  domain: string;
  /** Whether visitors reach it over HTTPS (the cookie's name and Secure). */
  secure: boolean;
  /** Its address as visitors write it, e.g. https://tunnels.example.com (known once the edge listens). */
  origin(): string;
  /** Where a live tunnel is reached (the edge's addresses). */
  addressOf: AddressOf;
  /** Company sign-in (--portal-oidc-*); none: passwords only. */
  oidc?: PortalOidcSettings;
  /** The SSH gateway, once it listens; none: off. */
  ssh?: () => SshGatewayFacts | undefined;
}

/**
 * Whether the connection may carry another request after this answer. The
 * edge hands an apex connection to the portal for good, so its next request
 * must be the apex's too. A browser keeps a connection for one host only
 * (and says it is a browser: Sec-Fetch-Mode); a proxy in front pools its
 * connections over every name, and a script may reuse one by address with
 * another Host: for them each answer closes its connection.
 */
const keepAlive = (req: Request, visit: PortalVisit) => !visit.proxied && req.headers.has("sec-fetch-mode");

interface Compiled {
  route: PortalRoute;
  regex: RegExp;
  names: string[];
}

const compile = (route: PortalRoute): Compiled => {
  const names: string[] = [];
  const source = route.path.replace(/:([a-z_]+)/g, (_m, name: string) => {
    names.push(name);
    return "([^/]+)";
  });
  return { route, regex: new RegExp(`^${source}$`), names };
};

/** localhost, *.localhost, or a loopback address: a domain no other machine's tunnels share. */
const isLoopbackName = (domain: string) => domain === "localhost" || domain.endsWith(".localhost") || /^127\.\d+\.\d+\.\d+$/.test(domain) || domain === "[::1]";

/** Answers' headers on every path: no framing, no sniffing, no referrer, no caching, the page's CSP. */
const withHeaders = (res: Response): Response => {
  for (const [name, value] of Object.entries(SECURITY_HEADERS)) if (!res.headers.has(name)) res.headers.set(name, value);
  return res;
};

export function createPortalApp(core: Core, options: PortalOptions): PortalApp {
  // the host visitors write (domain and port), as in the portal's address: the provider sends them back there
  const host = () => new URL(options.origin()).host;
  const table = portalRoutes(options.addressOf, options.oidc, host, options.ssh).map(compile);
  const { domain, secure } = options;
  if (!secure && !isLoopbackName(domain)) {
    log.warn("the portal is served over plain HTTP: any tunnel's page can plant a session cookie on its domain; serve it over HTTPS (the edge's TLS, or a proxy's with an https --public-url), or on loopback only", { domain });
  }

  async function call(req: Request, path: string, ctx: PortalContext): Promise<Response> {
    for (const c of table) {
      const m = c.regex.exec(path);
      if (!m) continue;
      const method = req.method as PortalMethod;
      const handler = c.route.methods[method];
      if (!handler) {
        throw new AppError("METHOD_NOT_ALLOWED", `method ${req.method} is not allowed on ${path}`, { Allow: Object.keys(c.route.methods).join(", ") });
      }
      c.names.forEach((name, i) => (ctx.params[name] = decodeURIComponent(m[i + 1]!)));
      const action = c.route.audit?.[method];
      try {
        const refused = checkCrossSite(req);
        if (refused) throw refused;
        let response: Response;
        if (c.route.public) {
          response = await (handler as (req: Request, ctx: PortalContext) => Promise<Response>)(req, ctx);
        } else {
          const cookie = readSessionCookie(req, secure);
          if (cookie.tossed) {
            const err = new AppError("UNAUTHORIZED", "two session cookies came: sign in again");
            throw Object.assign(err, { clear: true });
          }
          const user = await core.sessions.resolvePortal(cookie.key).catch((err: unknown) => {
            // a cookie no session is behind (ended, expired, or planted by a tunnel): signed out, and cleared
            if (cookie.present && err instanceof AppError && err.code === "UNAUTHORIZED") throw Object.assign(err, { clear: true });
            throw err;
          });
          const signedIn: SignedIn = { ...ctx, user, sessionKey: cookie.key! };
          ctx.audit.actor = { userId: user.id, username: user.username };
          response = await (handler as (req: Request, ctx: SignedIn) => Promise<Response>)(req, signedIn);
        }
        if (action) await recordPortalAudit(core, action, ctx, ctx.audit.refused ? "refused" : "ok", ctx.audit.refused);
        return response;
      } catch (err) {
        if (action) await recordPortalAudit(core, action, ctx, "failed", err instanceof AppError ? err.code : databaseUnavailable(err) ? "DATABASE_UNAVAILABLE" : "INTERNAL");
        throw err;
      }
    }
    throw new AppError("NOT_FOUND", `no such endpoint: ${req.method} ${path}`);
  }

  async function page(req: Request, path: string): Promise<Response> {
    if (req.method !== "GET" && req.method !== "HEAD") {
      return new Response("method not allowed\n", { status: 405, headers: { Allow: "GET, HEAD", "Content-Type": "text/plain; charset=utf-8" } });
    }
    const file = await pageFile(path);
    if (!file) return new Response("not found\n", { status: 404, headers: { "Content-Type": "text/plain; charset=utf-8" } });
    return new Response(req.method === "HEAD" ? null : file.body, { headers: { "Content-Type": file.type } });
  }

  return {
    async fetch(req, visit) {
      const res = await answer(req, visit);
      if (!keepAlive(req, visit)) res.headers.set("Connection", "close");
      return res;
    },
  };

  async function answer(req: Request, visit: PortalVisit): Promise<Response> {
    const ctx: PortalContext = { core, address: visit.client, secure, origin: options.origin(), audit: {}, params: {} };
    let path: string | undefined;
    try {
      const host = parseHost(req.headers.get("host"));
      path = host ? requestPath(req)?.pathname : undefined;
      if (!host || path === undefined) throw new AppError("BAD_REQUEST", "the Host header does not name a valid host");
      if (host.hostname !== domain) throw new AppError("PORTAL_MISDIRECTED", `this connection is the portal's, on ${domain}: connect again for ${host.hostname}`, { Connection: "close" });
      if (!path.startsWith("/_burrow/")) return withHeaders(await page(req, path));
      return withHeaders(await call(req, path, ctx));
    } catch (err) {
      if (err instanceof AppError) {
        const res = errorResponse(err);
        if ((err as { clear?: boolean }).clear) for (const c of clearTossed(secure, domain)) res.headers.append("Set-Cookie", c);
        return withHeaders(res);
      }
      if (err instanceof ClientGone) return new Response(null, { status: 400 });
      if (databaseUnavailable(err)) {
        reportUnavailable(`portal ${req.method} ${path ?? "?"}`, err);
        return withHeaders(errorResponse(new AppError("DATABASE_UNAVAILABLE", UNAVAILABLE_MESSAGE, { "Retry-After": String(UNAVAILABLE_RETRY_S) })));
      }
      log.error("portal request failed", { method: req.method, path, err: String(err) });
      if (err instanceof Error && err.stack) logStack(err);
      return withHeaders(json({ error: "internal server error" }, 500));
    }
  }
}
