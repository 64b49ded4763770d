/** The edge's own pages: small, self-contained HTML (no external assets). */
import { escapeHtml } from "../http/html.ts";

const STYLE = `
  :root { color-scheme: light dark; --fg:#1d2330; --muted:#5b6475; --bg:#f6f7f9; --card:#fff; --accent:#2f6fed; }
  @media (prefers-color-scheme: dark) { :root { --fg:#e6e9ef; --muted:#9aa3b5; --bg:#12151b; --card:#1b1f27; --accent:#6d9bff; } }
  * { box-sizing: border-box; }
  body { margin:0; min-height:100vh; display:grid; place-items:center; background:var(--bg); color:var(--fg);
         font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; padding: 1rem; }
  main { background:var(--card); max-width: 34rem; width:100%; padding: 2rem; border-radius: 12px;
         box-shadow: 0 1px 3px rgba(0,0,0,.08), 0 8px 24px rgba(0,0,0,.06); }
  h1 { font-size: 1.35rem; margin: 0 0 .75rem; }
  p { margin: .5rem 0; color: var(--muted); }
  code { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: .95em; color: var(--fg); }
  .status { font-weight: 600; color: var(--accent); letter-spacing: .04em; font-size: .85rem; }
  a.button { display:inline-block; margin-top: 1.25rem; padding: .65rem 1.2rem; border-radius: 8px;
             background: var(--accent); color: #fff; text-decoration: none; font-weight: 600; }
  a.button:focus-visible { outline: 3px solid var(--fg); outline-offset: 2px; }
  footer { margin-top: 1.5rem; font-size: .8rem; color: var(--muted); }
`;

export function page(status: number, title: string, bodyHtml: string, headers: Record<string, string> = {}): Response {
  const parts = pageParts(status, title, bodyHtml, headers);
  return new Response(parts.body, { status, headers: parts.headers });
}

/** A page as its status, fields and text: what a traffic policy's rule answers with (the tunnel's flags' pages). */
export function pageParts(status: number, title: string, bodyHtml: string, headers: Record<string, string> = {}): { status: number; headers: [string, string][]; body: string } {
  const html = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex"><title>${escapeHtml(title)}</title><style>${STYLE}</style></head>
<body><main>${bodyHtml}<footer>burrow</footer></main></body></html>`;
  return { status, headers: Object.entries({ "Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store", ...headers }), body: html };
}

export function unknownTunnelPage(host: string): Response {
  return page(
    404,
    "Tunnel not found",
    `<div class="status">404</div><h1>No tunnel here</h1>
<p>There is no tunnel at <code>${escapeHtml(host)}</code>. It may have been closed, or the address is mistyped.</p>`,
  );
}

/** A plain HTTP request for a tls tunnel's name: it is reached with TLS, end to end, at `address`. */
export function tlsTunnelPage(host: string, address: string | undefined): Response {
  return page(
    421,
    "A TLS tunnel",
    `<div class="status">421</div><h1>This tunnel speaks TLS</h1>
<p><code>${escapeHtml(host)}</code> passes TLS through to its own service${address ? `: connect with TLS at <code>${escapeHtml(address.replace(/^tls:\/\//, ""))}</code>` : ""}. This server does not answer it over plain HTTP.</p>`,
  );
}

export function badRequestPage(why: string): Response {
  return page(400, "Bad request", `<div class="status">400</div><h1>Bad request</h1><p>${escapeHtml(why)}</p>`, { Connection: "close" });
}

/** Over a connection cap: quick, small, and the connection closes after it. */
export function overloadedPage(): Response {
  return page(
    503,
    "Too many connections",
    `<div class="status">503</div><h1>Too many connections</h1><p>This server has too many connections open from your address, or in all. Try again in a few seconds.</p>`,
    { Connection: "close", "Retry-After": "5" },
  );
}

/** Several nodes: more names of other nodes' tunnels are being looked up than --relay-lookups allows. */
export function lookupsBusyPage(): Response {
  return page(
    503,
    "Busy",
    `<div class="status">503</div><h1>Busy</h1><p>This server is looking up too many tunnels at once. Try again in a second.</p>`,
    { "Retry-After": "1" },
  );
}

export function badGatewayPage(host: string, why: string): Response {
  return page(
    502,
    "Local service unavailable",
    `<div class="status">502</div><h1>The tunnel's local service did not answer</h1>
<p>The tunnel <code>${escapeHtml(host)}</code> is up, but ${escapeHtml(why)}.</p>
<p>If this is your tunnel, check that your service is running on the port you gave <code>burrow</code>.</p>`,
  );
}

/** The 502 for a service that took too long: slow but maybe healthy, so say how to wait longer. */
export function slowServicePage(host: string, waitedS: number, maxS: number): Response {
  return page(
    502,
    "Local service too slow",
    `<div class="status">502</div><h1>The tunnel's local service took too long</h1>
<p>The tunnel <code>${escapeHtml(host)}</code> is up and its service took the request, but it did not answer within ${waitedS} s.</p>
<p>If this is your tunnel and the service is slow on purpose (a long poll, a big report), let the edge wait longer:
<code>burrow http PORT --response-timeout S</code>, up to ${maxS} s on this server.</p>`,
  );
}

export function warningPage(host: string, username: string, continueUrl: string): Response {
  return page(
    200,
    "You are about to visit a tunnelled site",
    `<div class="status">NOTICE</div><h1>This site is served through a tunnel</h1>
<p><code>${escapeHtml(host)}</code> is served through a burrow tunnel by <strong>${escapeHtml(username)}</strong>
from their own computer. Continue only if you know and trust who sent you here.</p>
<p>Never enter passwords or payment details unless you are sure of the site's owner.</p>
<a class="button" href="${escapeHtml(continueUrl)}">Continue to the site</a>`,
  );
}

export function landingPage(domain: string): Response {
  return page(
    404,
    "burrow",
    `<h1>burrow tunnel server</h1><p>Tunnels on this server are reached at <code>&lt;name&gt;.${escapeHtml(domain)}</code>.</p>`,
  );
}
