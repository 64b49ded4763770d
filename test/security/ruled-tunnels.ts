/**
 * Three tunnels with access rules and the visitors that must never get past
 * them, for the rules-before-live tests (one node, and several): one with
 * basic auth, one with an IP allow list that 127.0.0.1 is outside of (only
 * 127.0.0.2 may come), one with OIDC sign-in at a real provider on loopback.
 * A visitor without credentials from 127.0.0.1 gets 401, 403, and the
 * provider's sign-in (302) or 401; the service's body carries MARKER, which
 * no such visitor may ever read.
 */
import { expect } from "bun:test";
import { request } from "node:http";
import { tunnelFetch, type AgentStart } from "../harness/agent.ts";
import { TEST_CLIENT_ID, TEST_CLIENT_SECRET } from "../harness/oidc-provider.ts";
import { leakOf, of, startHammer, type Hammer, type Target } from "./visitor-hammer.ts";

export const MARKER = "the-service-body-c41e";
export const PASSWORD = "right-horse-7731";
export const BASIC = "rb-basic";
export const IP = "rb-ip";
export const OIDC = "rb-oidc";
/** The refusal each tunnel's rule gives a visitor without credentials from 127.0.0.1. */
export const REFUSALS: Record<string, number[]> = { [BASIC]: [401], [IP]: [403], [OIDC]: [302, 401] };

/** The local service behind all three. */
export const serveMarker = () => Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response(`${MARKER}: served`) });

/** The three agents' settings, on `edgeUrl`. */
export function ruledAgents(edgeUrl: string, token: string, servicePort: number, issuer: string): AgentStart[] {
  const common = { kind: "http" as const, target: servicePort, server: edgeUrl, token };
  const quiet = ["--skip-warning", "--no-inspect"];
  return [
    { ...common, args: ["--subdomain", BASIC, "--basic-auth", `alice:${PASSWORD}`, ...quiet] },
    { ...common, args: ["--subdomain", IP, "--allow-cidr", "127.0.0.2/32", ...quiet] },
    { ...common, args: ["--subdomain", OIDC, "--oidc-issuer", issuer, "--oidc-client-id", TEST_CLIENT_ID, ...quiet], env: { BURROW_OIDC_CLIENT_SECRET: TEST_CLIENT_SECRET } },
  ];
}

/** Visitors without credentials at the three tunnels through each edge port `ports` gives, until stopped. */
export function hammerRuled(ports: () => number[]): Hammer {
  const targets: Target[] = [];
  for (let i = 0; i < ports().length; i++) {
    const port = () => ports()[i]!;
    targets.push(
      { name: BASIC, port },
      { name: IP, port },
      // a browser opening a page is sent to sign in; anything else is told 401
      { name: OIDC, port, headers: { accept: "text/html" } },
      { name: OIDC, port },
    );
  }
  return startHammer(targets, { leak: leakOf(MARKER, REFUSALS) });
}

/** Every answer was a refusal of the rules or a page of the edge; an OIDC redirect went to the provider. */
export function judge(hammer: Hammer, issuer: string): void {
  expect(hammer.leaked.slice(0, 3).map((s) => ({ ...s, body: s.body.slice(0, 120) }))).toEqual([]);
  for (const s of of(hammer.shots, OIDC).filter((s) => s.status === 302)) expect(s.location ?? "").toStartWith(`${issuer}/`);
}

/** From now on: each tunnel has given its rule's refusal `times` more times. */
export function refusedAgain(h: Hammer, times = 20): () => boolean {
  const refusals = () => [h.count(BASIC, 401), h.count(IP, 403), h.count(OIDC, 302) + h.count(OIDC, 401)];
  const before = refusals();
  return () => refusals().every((n, i) => n - before[i]! >= times);
}

/** The service answers through `edgePort` a visitor with the password, and one from the allowed address: the tunnels are live. */
export async function servedWithRules(edgePort: number): Promise<void> {
  const withPassword = await tunnelFetch(edgePort, BASIC, "/", { headers: { authorization: `Basic ${btoa(`alice:${PASSWORD}`)}` } });
  expect(await withPassword.text()).toContain(MARKER);
  const fromAllowed = await new Promise<string>((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port: edgePort, localAddress: "127.0.0.2", path: "/", headers: { host: `${IP}.localhost:${edgePort}` }, timeout: 5_000 }, (res) => {
      let body = "";
      res.on("data", (d: Buffer) => (body += d));
      res.on("end", () => resolve(body));
    });
    req.on("timeout", () => req.destroy(new Error("no answer within 5 s")));
    req.on("error", reject);
    req.end();
  });
  expect(fromAllowed).toContain(MARKER);
}
