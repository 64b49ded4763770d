/**
 * GET /metrics on the admin port: the Prometheus exposition. Read by a
 * signed-in admin (the panel, curl with the cookie), an admin API key, or
 * by a scraper that sends `Authorization: Bearer <--metrics-token>`; anyone
 * else gets 401.
 *
 * The token is compared as SHA-256 digests in constant time, so neither its
 * length nor a matching prefix shows in the time of an answer, and it is
 * never written anywhere (not in a log line, not in an error).
 */
import { ADMIN_KEY_PREFIX } from "../core/admin-keys.ts";
import { AppError } from "../core/errors.ts";
import { digestsEqual, sha256Hex } from "../core/secrets.ts";
import { readSessionCookie } from "./auth.ts";
import type { Route } from "./context.ts";

export const METRICS_PATH = "/metrics";

export interface MetricsExport {
  render(): Promise<string>;
  contentType: string;
}

const CHALLENGE = { "WWW-Authenticate": 'Bearer realm="burrow metrics"' };

/** The credentials of an `Authorization: Bearer ...` header; undefined for none or another scheme. */
function bearer(req: Request): string | undefined {
  const header = req.headers.get("authorization");
  return header === null ? undefined : /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header)?.[1];
}

export function metricsRoutes(metrics: MetricsExport, token: string | undefined): Route[] {
  const tokenDigest = token === undefined ? undefined : sha256Hex(token);
  const tokenMatches = (req: Request) => {
    const given = bearer(req);
    return tokenDigest !== undefined && given !== undefined && digestsEqual(sha256Hex(given), tokenDigest);
  };
  return [
    {
      path: METRICS_PATH,
      // the wrapper asks for no session: a scraper has the token instead, checked here
      public: true,
      methods: {
        async GET(req, { core }) {
          if (!tokenMatches(req)) {
            const given = bearer(req);
            try {
              // an admin API key reads them as its admin would; else the session cookie
              if (given?.startsWith(ADMIN_KEY_PREFIX)) await core.adminKeys.authenticate(given);
              else await core.sessions.resolve(readSessionCookie(req));
            } catch (err) {
              if (err instanceof AppError && err.status === 401) {
                throw new AppError("UNAUTHORIZED", "an admin session or the metrics bearer token (--metrics-token) is required", CHALLENGE);
              }
              throw err;
            }
          }
          return new Response(await metrics.render(), {
            headers: { "Content-Type": metrics.contentType, "Cache-Control": "no-store" },
          });
        },
      },
      docs: {
        GET: {
          summary: "Prometheus metrics: for an admin (session or API key) or the scraper's --metrics-token",
          security: [{ session: [] }, { apiKey: [] }, { metricsToken: [] }],
          responses: {
            200: { description: "The Prometheus text exposition", raw: { contentType: "text/plain", schema: { type: "string" } } },
            401: { description: "Neither an admin session nor the metrics token (WWW-Authenticate: Bearer)" },
          },
        },
      },
    },
  ];
}
