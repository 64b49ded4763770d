/**
 * With ACME, the plain HTTP port: it answers the CA's HTTP-01 validations
 * (`/.well-known/acme-challenge/<token>`, for any Host, before anything
 * else), and sends every other request to the same URL over HTTPS with a
 * 308, which keeps the method and body. It holds no secrets and routes to no
 * tunnel; idle connections close after --idle-timeout, and under descriptor
 * pressure it stops accepting with the public port (a PublicListener).
 */
import { parseHost, requestPath } from "../http/request-target.ts";
import { PublicListener } from "./public-listener.ts";

export interface RedirectOptions {
  host: string;
  port: number;
  /** The HTTPS port visitors are sent to (443 leaves it out of the URL). */
  httpsPort(): number;
  challenge(path: string): Response | undefined;
  idleTimeoutS: number;
}

export function listenRedirect(opts: RedirectOptions): PublicListener<undefined> {
  return new PublicListener<undefined>({
    hostname: opts.host,
    port: opts.port,
    reusePort: false,
    idleTimeout: opts.idleTimeoutS,
    fetch(req) {
      const target = requestPath(req);
      const answer = target === undefined ? undefined : opts.challenge(target.pathname);
      if (answer) return answer;
      const host = parseHost(req.headers.get("host"));
      if (!host || !target) return new Response("a Host header naming this server is needed\n", { status: 400, headers: { "content-type": "text/plain" } });
      const port = opts.httpsPort();
      const location = `https://${host.hostname}${port === 443 ? "" : `:${port}`}${target.pathname}${target.search}`;
      return new Response(null, { status: 308, headers: { location, "cache-control": "no-store" } });
    },
    error() {
      return new Response("internal error\n", { status: 500 });
    },
  });
}
