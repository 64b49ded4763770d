/**
 * A tunnel's access policy, compiled once at the handshake from what its
 * agent asked and its user's settings, and run by the edge on every
 * visitor before the browser warning and the tunnel:
 *
 *   IP rules (403) -> authentication (basic: 401; OIDC: the provider's
 *   sign-in for a browser's page, 401 for anything else) -> warning -> tunnel
 *
 * A tunnel without rules has no policy at all (Tunnel.access undefined), so
 * the hot path pays one property read. TCP tunnels use the IP rules only,
 * at accept.
 */
import { USER_EMAIL_HEADER } from "../../validate/access.ts";
import type { HttpAccess, TcpAccess } from "../../protocol/messages.ts";
import { BasicAuth } from "./basic-auth.ts";
import { HeaderRules } from "./header-rules.ts";
import { IpRules } from "./ip-rules.ts";
import { CALLBACK_PATH, OidcGate, SESSION_COOKIE } from "./oidc.ts";
import type { OidcProvider } from "./oidc-discovery.ts";
import { addressRefusedPage, signInRefusedPage, signInRequiredPage, tooManyGuessesPage } from "./pages.ts";

/** What a visitor who passed is known as: the OIDC email, when signed in that way. */
export interface Passed {
  email?: string;
}
const PASSED: Passed = {};

export interface AccessSources {
  /** What the agent asked for the tunnel. */
  asked?: HttpAccess | TcpAccess;
  /** The user's allow_cidrs: applied to every tunnel of the user, besides the agent's own list. */
  userAllowCidrs?: readonly string[];
  /** The tunnel's name (its keys are derived from it) or, for tcp, its port. */
  name: string;
  /** The discovered provider for `asked.oidc`. */
  provider?: OidcProvider;
  /** Wrong basic-auth passwords an address may try before it is locked (--basic-auth-limit). */
  basicAuthLimit?: number;
}

export class AccessPolicy {
  private constructor(
    /** What it was made from, to make it again when the user's allow_cidrs change. */
    private readonly sources: AccessSources,
    private readonly ip: IpRules | undefined,
    private readonly basic: BasicAuth | undefined,
    private readonly oidc: OidcGate | undefined,
    private readonly headers: HeaderRules | undefined,
  ) {}

  /** The policy, or undefined when there is nothing to enforce. Settings were checked by core/access.ts. */
  static compile(src: AccessSources): AccessPolicy | undefined {
    const asked = src.asked;
    const http = asked as HttpAccess | undefined; // a tcp tunnel's settings have the IP lists only
    const ip = new IpRules([asked?.allowCidrs ?? [], src.userAllowCidrs ?? []], asked?.denyCidrs ?? []);
    const basic = http?.basicAuth?.length ? new BasicAuth(http.basicAuth, src.name, Date.now, src.basicAuthLimit) : undefined;
    const oidc = http?.oidc && src.provider ? new OidcGate(src.provider, http.oidc, src.name) : undefined;
    const headers = new HeaderRules({
      requestAdd: http?.requestHeaderAdd,
      // the tunnel's own password goes no further than the edge
      requestRemove: [...(http?.requestHeaderRemove ?? []), ...(basic ? ["authorization"] : [])],
      responseAdd: http?.responseHeaderAdd,
    });
    if (ip.empty && !basic && !oidc && headers.empty) return undefined;
    return new AccessPolicy(src, ip.empty ? undefined : ip, basic, oidc, headers.empty ? undefined : headers);
  }

  /**
   * A live tunnel's policy after its user's allow_cidrs changed: the same
   * agent rules (and OIDC keys, so its visitors stay signed in) with the
   * new list. `current` undefined: the tunnel had no rules of its own.
   */
  static withUserAllowCidrs(current: AccessPolicy | undefined, name: string, userAllowCidrs: readonly string[]): AccessPolicy | undefined {
    return AccessPolicy.compile({ ...(current?.sources ?? { name }), userAllowCidrs });
  }

  /** The user's allow_cidrs it was made with. */
  get userAllowCidrs(): readonly string[] {
    return this.sources.userAllowCidrs ?? [];
  }

  /** Whether visitors must sign in (basic auth or OIDC): what a user's require_auth asks of every tunnel. */
  get authenticates(): boolean {
    return this.basic !== undefined || this.oidc !== undefined;
  }

  /** IP rules say no to this canonical address (a tcp tunnel closes the connection at accept). */
  refusesAddress(address: string): boolean {
    return this.ip !== undefined && !this.ip.allows(address);
  }

  /**
   * A visitor's request: the answer to give instead of forwarding, or who
   * the visitor is. `client`: the visitor's canonical address (behind a
   * trusted proxy, the client it names); `host`: the Host as sent.
   */
  async admit(req: Request, url: URL, client: string, host: string, secure: boolean): Promise<Response | Passed> {
    if (this.refusesAddress(client)) return addressRefusedPage(host, client);
    return this.signIn(req, url, client, host, secure);
  }

  /**
   * The sign-in rules alone (basic auth, OIDC), for a visitor the IP rules
   * let through (the judgement's access step asks those first, for every
   * door: edge/judgement/pipeline.ts).
   */
  signIn(req: Request, url: URL, client: string, host: string, secure: boolean): Response | Passed | Promise<Response | Passed> {
    if (this.basic) {
      const verdict = this.basic.judge(client, req.headers.get("authorization"));
      if (verdict.retryAt !== undefined) return tooManyGuessesPage(host, Math.max(1, Math.ceil((verdict.retryAt - Date.now()) / 1000)));
      return verdict.passed ? PASSED : signInRequiredPage(host, this.basic.challenge);
    }
    if (this.oidc) return this.signedIn(this.oidc, req, url, host, secure);
    return PASSED;
  }

  private async signedIn(oidc: OidcGate, req: Request, url: URL, host: string, secure: boolean): Promise<Response | Passed> {
    if (url.pathname === CALLBACK_PATH) {
      const done = await oidc.callback(req, url, host, secure);
      if (done.kind === "refused") {
        const res = signInRefusedPage(done.status, done.why);
        res.headers.append("Set-Cookie", OidcGate.endFlow(secure));
        return res;
      }
      const headers = new Headers({ Location: localPath(done.to), "Cache-Control": "no-store" });
      headers.append("Set-Cookie", done.cookie);
      headers.append("Set-Cookie", OidcGate.endFlow(secure));
      return new Response(null, { status: 302, headers });
    }
    const email = await oidc.session(req, host);
    if (email !== undefined) return { email };
    // a browser opening a page is sent to sign in; scripts, fetches and WebSocket upgrades are told 401
    const upgrade = (req.headers.get("upgrade") ?? "") !== "";
    const page = req.method === "GET" && !upgrade && (req.headers.get("accept") ?? "").includes("text/html");
    if (page) return oidc.signIn(host, secure, url.pathname + url.search);
    return signInRequiredPage(host, `Burrow-OIDC realm="${host.replace(/["\\]/g, "")}"`, "This tunnel asks visitors to sign in with their browser.");
  }

  /** The request's header list as the local service gets it: rules applied, the signed-in identity set. */
  rewriteRequest(headers: [string, string][], passed: Passed | undefined): void {
    this.headers?.rewriteRequest(headers);
    if (this.oidc) {
      stripSessionCookie(headers);
      if (passed?.email !== undefined) headers.push([USER_EMAIL_HEADER, passed.email]);
    }
  }

  /** Whether the response rules change heads (the edge then writes each response head anew). */
  get rewritesResponse(): boolean {
    return this.headers?.rewritesResponse ?? false;
  }

  rewriteResponse(headers: [string, string][]): [string, string][] {
    return this.headers ? this.headers.rewriteResponse(headers) : headers;
  }
}

/** The edge's session cookie is the tunnel's credential: the local service does not get it. */
function stripSessionCookie(headers: [string, string][]): void {
  for (let i = headers.length - 1; i >= 0; i--) {
    const [name, value] = headers[i]!;
    if (name.toLowerCase() !== "cookie" || !value.includes(SESSION_COOKIE)) continue;
    const kept = value.split(";").filter((c) => c.trim().split("=")[0] !== SESSION_COOKIE).join(";").trim();
    if (kept === "") headers.splice(i, 1);
    else headers[i] = [name, kept];
  }
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
