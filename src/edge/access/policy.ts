/**
 * A tunnel's access settings, compiled once at the handshake from what its
 * agent asked and its user's settings. Its IP rules, basic auth and
 * header rules are the tunnel's flags layer (flag-layer.ts), which the
 * policy engine runs for the tunnel's requests and connections after the
 * operator's layers and before the tunnel's own policy:
 *
 *   IP rules (403) -> basic auth (401) -> request header rules
 *   -> OIDC (the provider's sign-in for a browser's page, 401 for anything
 *   else: still the edge's own step, here) -> warning -> tunnel
 *
 * The same IP rules are asked directly where no policy runs (a udp
 * datagram, a connector's stream to a private tunnel) and of the visits
 * that stay open when they narrow. A tunnel without rules has no settings
 * at all (Tunnel.access undefined), so the hot path pays one property read.
 */
import { USER_EMAIL_HEADER } from "../../validate/access.ts";
import type { HttpAccess, TcpAccess } from "../../protocol/messages.ts";
import { KINDS, type TunnelKind } from "../../protocol/kinds.ts";
import type { Policy } from "../../policy/index.ts";
import { WorkingRequest } from "../../policy/message.ts";
import { BasicAuth } from "./basic-auth.ts";
import { flagLayer } from "./flag-layer.ts";
import { HeaderRules } from "./header-rules.ts";
import { IpRules } from "./ip-rules.ts";
import { CALLBACK_PATH, OidcGate, SESSION_COOKIE } from "./oidc.ts";
import type { OidcProvider } from "./oidc-discovery.ts";
import { signInRefusedPage, signInRequiredPage } from "./pages.ts";

/** What a visitor who passed is known as: the OIDC email, when signed in that way. */
export interface Passed {
  email?: string;
}
const PASSED: Passed = {};

/** What a tunnel's flags layer judges (AccessSources.judged), by its kind: nothing for a private tunnel (the edge does not read its traffic) or a udp one (no policy runs on datagrams). */
export function flagsJudge(kind: TunnelKind, isPrivate: boolean): "http" | "raw" | "none" {
  if (isPrivate) return "none";
  const facts = KINDS[kind];
  return facts.access === "http" ? "http" : facts.carries === "bytes" ? "raw" : "none";
}

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
  /**
   * What the flags layer judges: an http tunnel's requests, a tcp or tls
   * tunnel's connections, or nothing (a udp or a private tunnel: its IP
   * rules are asked directly). Default http.
   */
  judged?: "http" | "raw" | "none";
}

export class AccessPolicy {
  /** The flags as the rules the policy engine runs (flag-layer.ts): the tunnel's flags layer; undefined: they make none. */
  readonly flags: Policy | undefined;

  private constructor(
    /** What it was made from, to make it again when the user's allow_cidrs change. */
    private readonly sources: AccessSources,
    private readonly ip: IpRules | undefined,
    private readonly basic: BasicAuth | undefined,
    private readonly oidc: OidcGate | undefined,
    headers: HeaderRules | undefined,
  ) {
    const judged = sources.judged ?? "http";
    this.flags = judged === "none" ? undefined : flagLayer({ kind: judged, ip, basic, headers });
  }

  /** The policy, or undefined when there is nothing to enforce. Settings were checked by core/access.ts. */
  static compile(src: AccessSources): AccessPolicy | undefined {
    const asked = src.asked;
    const http = asked as HttpAccess | undefined; // a tcp tunnel's settings have the IP lists only
    const ip = new IpRules([asked?.allowCidrs ?? [], src.userAllowCidrs ?? []], asked?.denyCidrs ?? []);
    const basic = http?.basicAuth?.length ? new BasicAuth(http.basicAuth, src.name, Date.now, src.basicAuthLimit) : undefined;
    const oidc = http?.oidc && src.provider ? new OidcGate(src.provider, http.oidc, src.name) : undefined;
    const headers = new HeaderRules({ requestAdd: http?.requestHeaderAdd, requestRemove: http?.requestHeaderRemove, responseAdd: http?.responseHeaderAdd });
    if (ip.empty && !basic && !oidc && headers.empty) return undefined;
    return new AccessPolicy(src, ip.empty ? undefined : ip, basic, oidc, headers.empty ? undefined : headers);
  }

  /**
   * A live tunnel's policy after its user's allow_cidrs changed: the same
   * agent rules (and OIDC keys, so its visitors stay signed in) with the
   * new list. `current` undefined: the tunnel had no rules of its own
   * (`judged`: what its flags layer judges, as AccessSources says).
   */
  static withUserAllowCidrs(current: AccessPolicy | undefined, name: string, userAllowCidrs: readonly string[], judged?: AccessSources["judged"]): AccessPolicy | undefined {
    return AccessPolicy.compile({ ...(current?.sources ?? { name, judged }), userAllowCidrs });
  }

  /** The user's allow_cidrs it was made with. */
  get userAllowCidrs(): readonly string[] {
    return this.sources.userAllowCidrs ?? [];
  }

  /** Whether visitors must sign in (basic auth or OIDC): what a user's require_auth asks of every tunnel. */
  get authenticates(): boolean {
    return this.basic !== undefined || this.oidc !== undefined;
  }

  /** Whether visitors sign in with OIDC: the edge's own step after the flags layer (oidcSignIn). */
  get signsInWithOidc(): boolean {
    return this.oidc !== undefined;
  }

  /** IP rules say no to this canonical address (a tcp tunnel closes the connection at accept). */
  refusesAddress(address: string): boolean {
    return this.ip !== undefined && !this.ip.allows(address);
  }

  /**
   * A visitor's request judged by every rule: the answer to give instead of
   * forwarding, or who the visitor is. `client`: the visitor's canonical
   * address (behind a trusted proxy, the client it names); `host`: the
   * Host as sent.
   */
  async admit(req: Request, url: URL, client: string, host: string, secure: boolean): Promise<Response | Passed> {
    return this.signIn(req, url, client, host, secure);
  }

  /**
   * The flags layer run by the policy engine on `req` (its IP rules, basic
   * auth), then OIDC: for a caller that holds the request as a Request and
   * judges it outside a tunnel's policies (a tunnel with only --oidc has no
   * flags layer; see http-door.ts).
   */
  signIn(req: Request, url: URL, client: string, host: string, secure: boolean): Response | Passed | Promise<Response | Passed> {
    if (this.flags?.has("on_http_request")) {
      const now = Date.now();
      const scheme = secure ? "https" : "http";
      const facts = { method: req.method, target: url.pathname + url.search, scheme, host, headers: [...req.headers] as [string, string][] } as const;
      const out = this.flags.runFrom(
        "on_http_request",
        { conn: { clientIp: client, clientPort: 0, serverPort: 0, openedAt: now }, endpoint: { host, port: 0, protocol: scheme, url: `${scheme}://${host}` }, tunnel: { name: this.sources.name, kind: "http", user: "" }, request: facts, now },
        { request: new WorkingRequest(facts, now) },
      );
      // the flags' actions never wait
      if (out instanceof Promise) throw new Error("the tunnel's flags layer waited");
      if (out.verdict.kind === "respond") {
        const r = out.verdict.response;
        return new Response(typeof r.body === "string" ? r.body : new Uint8Array(r.body), { status: r.status, headers: r.headers });
      }
    }
    return this.oidcSignIn(req, url, host, secure);
  }

  /** The OIDC sign-in alone (PASSED without it): after the flags layer, before the tunnel's own policy. */
  oidcSignIn(req: Request, url: URL, host: string, secure: boolean): Response | Passed | Promise<Response | Passed> {
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

  /** Whether the request's head is changed after the policies (OIDC: its session cookie off, the signed-in email on). */
  get rewritesRequest(): boolean {
    return this.oidc !== undefined;
  }

  /** The request's header list as the local service gets it: the OIDC session cookie taken off, the signed-in identity set. */
  rewriteRequest(headers: [string, string][], passed: Passed | undefined): void {
    if (this.oidc) {
      stripSessionCookie(headers);
      if (passed?.email !== undefined) headers.push([USER_EMAIL_HEADER, passed.email]);
    }
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
