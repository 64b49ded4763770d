/**
 * What an OIDC gate (oidc.ts) answers a request it has not let through, in
 * the form the policy engine's openid-connect action takes (policy/
 * services.ts OidcAdapter): the end of a sign-in at the callback (the
 * session cookie and a redirect back, or why not), the start of one for a
 * browser opening a page, and a 401 for anything else (a script, a fetch,
 * a WebSocket upgrade), never a redirect. Shared by the tunnel's --oidc
 * sign-in (oidc-flag.ts) and the openid-connect action's
 * (traffic-policy/oidc-sign-in.ts), which differ in which paths they take
 * and which gate answers.
 */
import { NOT_SIGNED_IN, type OidcAdapter, type OidcRequest, type PolicyResponse } from "../../policy/index.ts";
import type { OidcGate } from "./oidc.ts";
import { signInRefusedPage, signInRequiredPage } from "./pages.ts";

export type OidcVerdict = Awaited<ReturnType<OidcAdapter["admit"]>>;

/** The request as the gate reads it (a Request: its cookies, its Accept), and its URL; undefined when the platform refuses its fields. */
export function gateRequest(request: OidcRequest): { req: Request; url: URL } | undefined {
  try {
    const url = new URL(`${request.secure ? "https" : "http"}://${request.host}${request.target}`);
    const headers = new Headers();
    for (const [name, value] of request.headers) headers.append(name, value);
    return { req: new Request(url.href, { method: request.method, headers }), url };
  } catch {
    return undefined;
  }
}

/** The provider sent the visitor back to `gate`'s flow: the session and the way back, or why not; the flow's cookie ended either way. */
export async function finishSignIn(gate: OidcGate, req: Request, url: URL, host: string, secure: boolean): Promise<Response> {
  const done = await gate.callback(req, url, host, secure);
  if (done.kind === "refused") {
    const res = signInRefusedPage(done.status, done.why);
    res.headers.append("Set-Cookie", gate.endFlowCookie(secure));
    return res;
  }
  const headers = new Headers({ Location: localPath(done.to), "Cache-Control": "no-store" });
  headers.append("Set-Cookie", done.cookie);
  headers.append("Set-Cookie", gate.endFlowCookie(secure));
  return new Response(null, { status: 302, headers });
}

/** No session: a browser opening a page is sent to sign in; scripts, fetches and WebSocket upgrades are told 401. */
export function askSignIn(gate: OidcGate, req: Request, url: URL, host: string, secure: boolean): Response | Promise<Response> {
  const upgrade = (req.headers.get("upgrade") ?? "") !== "";
  if (req.method === "GET" && !upgrade && (req.headers.get("accept") ?? "").includes("text/html")) return gate.signIn(host, secure, url.pathname + url.search);
  return signInRequiredPage(host, `Burrow-OIDC realm="${host.replace(/["\\]/g, "")}"`, "This tunnel asks visitors to sign in with their browser.");
}

/** An answer of the edge's as the action gives it (Set-Cookie fields kept apart, each its own). */
export async function responded(res: Response): Promise<OidcVerdict> {
  const headers: [string, string][] = [];
  res.headers.forEach((value, name) => {
    if (name !== "set-cookie") headers.push([name, value]);
  });
  for (const cookie of res.headers.getSetCookie()) headers.push(["set-cookie", cookie]);
  const response: PolicyResponse = { status: res.status, headers, body: res.body === null ? "" : await res.text() };
  return { kind: "respond", response };
}

/** A path on this host, resolved as a browser resolves a Location (so it cannot lead off the host). */
function localPath(to: string): string {
  if (!to.startsWith("/")) return "/";
  const base = "http://burrow.invalid";
  try {
    const resolved = new URL(to, base);
    return resolved.origin === base ? resolved.pathname + resolved.search : "/";
  } catch {
    return "/";
  }
}

/** A visit judged again (OidcRequest.rejudging): signed in by the session it carries, or refused without an answer of its own (no one reads it). */
export async function sessionOnly(gate: OidcGate, req: Request, host: string): Promise<OidcVerdict> {
  const email = await gate.session(req, host);
  return email !== undefined ? { kind: "signed-in", email, stripCookies: [gate.sessionCookie] } : { kind: "respond", response: NOT_SIGNED_IN };
}
