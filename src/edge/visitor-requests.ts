/**
 * A visitor's request on the public port, from its connection's place in
 * the budget to its route: the bare domain (landing page; the agents' and
 * other nodes' WebSockets, handed to the loopback server), a tunnel's name
 * (the judgement's steps through the HTTP door: http-door.ts), or a 400
 * for what cannot be read. The connection itself (reading heads, keep-alive, timeouts) is
 * http-connection.ts's; a forwarded request is forward.ts's.
 */
import type { TrustedProxies } from "../http/addresses.ts";
import { headAsJudged } from "../http/head-as-judged.ts";
import type { Http2Limits } from "../http2/limits.ts";
import type { HeadRefusal, RequestHead } from "../http/request-head.ts";
import { limitedLog } from "../log.ts";
import { HTTP_REQUEST, type EdgeCounters } from "../metrics/edge-counters.ts";
import type { DirectPortAnswer } from "../protocol/messages.ts";
import { CHECK_PATH, CONNECT_PATH, NODE_PATH } from "../protocol/wire.ts";
import type { SocketBudget } from "../sockets/socket-budget.ts";
import { answerDate } from "./answer-date.ts";
import { EDGE_READS } from "./forward.ts";
import { h2Visitors } from "./h2/visitors.ts";
import type { Loopback } from "./handoff.ts";
import { hostRoute } from "./host-route.ts";
import type { ConnectionServer, HttpConnection } from "./http-connection.ts";
import { HttpDoor, HttpVisit } from "./http-door.ts";
import { judge } from "./judgement/pipeline.ts";
import { badRequestPage, landingPage, overloadedPage, page, unknownTunnelPage } from "./pages.ts";
import type { Registry, Tunnel } from "./registry.ts";

/** Malformed requests are the sender's fault: logged at info, a few a minute. */
const clientFault = limitedLog(20);
/** Refusals for being over a connection cap: a few lines a minute, whatever the flood. */
export const overLimit = limitedLog(10);

export interface VisitorDeps {
  domain: string;
  /** Visitors see https (the edge's TLS, or a proxy's). */
  secure: boolean;
  registry: Registry;
  /** Visitor connections per client address and in all. */
  budget: SocketBudget;
  trustedProxies: TrustedProxies;
  responseTimeoutMs: number;
  maxResponseTimeoutMs: number;
  startedAt: number;
  /** Names held at start for the agents of the server before. */
  heldAtStart: Set<string>;
  /** A place for an agent's connection from this address (false: over --max-agents-per-ip), given back by releaseAgent. */
  admitAgent(address: string): boolean;
  releaseAgent(address: string): void;
  /** Requests by kind and status class, and their time to response head (the metrics). */
  counters: EdgeCounters;
  /** Where agents' and nodes' WebSockets are served. */
  loopback(): Loopback<unknown>;
  /** Where requests for the domain itself are served (the portal); undefined: the landing page answers them. */
  apex?(): Loopback<undefined> | undefined;
  /** The agents' direct port, when the edge has one (told to agents that ask: wire.ts CONNECT_PATH). */
  directPort?(): number | undefined;
  /** Where a tls tunnel is reached, for the page a plain HTTP request to its name gets. */
  tlsAddress?(subdomain: string): string | undefined;
  /** Several nodes: a tunnel of another node, served through it (a page when it cannot be). */
  remote?(subdomain: string): Promise<Tunnel | Response | undefined>;
  /** Several nodes: a pool's members on the other nodes, taken in turn with this node's own. */
  poolOthers?(name: string): readonly Tunnel[];
  /** Visitors that speak HTTP/2 (h2/visitors.ts): each connection's limits, and --max-request-fields for the heads its streams make; none: no HTTP/2. */
  http2?: { limits: Http2Limits; maxFields?: number };
}

/** The answer to an agent's GET of CONNECT_PATH (wire.ts). */
function directPortAnswer(port: number | undefined): Response {
  const body: DirectPortAnswer = { direct_port: port ?? null };
  // its Date is what burrow diagnose compares its clock with
  return Response.json(body, { headers: { "Cache-Control": "no-store", Date: answerDate() } });
}

/** A request for the agents' or nodes' path that is not a WebSocket upgrade. */
function upgradeRequired(): Response {
  return new Response("expected a WebSocket upgrade\n", { status: 426, headers: { Upgrade: "websocket", "Content-Type": "text/plain; charset=utf-8" } });
}

export function visitorServer(deps: VisitorDeps): ConnectionServer {
  // a tunnel's name: the judgement's steps (judgement/pipeline.ts) through the HTTP door
  const door = new HttpDoor({ ...deps, answered });

  function refused(_conn: HttpConnection, refusal: HeadRefusal): Response {
    clientFault("bad request refused", { why: refusal.why, remote: _conn.client ?? _conn.peer.address });
    deps.counters.request(HTTP_REQUEST, refusal.status, performance.now());
    return page(refusal.status, "Bad request", `<div class="status">${refusal.status}</div><h1>Bad request</h1><p>${refusal.why}</p>`, { Connection: "close" });
  }

  function answer(conn: HttpConnection, head: RequestHead, res: Response, startedAt: number): undefined {
    deps.counters.request(HTTP_REQUEST, res.status, startedAt);
    // a body the edge does not read cannot be told from a next request: the connection closes after it
    void conn.answer(res, head, head.framing === "none");
    return undefined;
  }

  /** The answer to a visit, counted with its time. */
  function answered(v: HttpVisit, res: Response): undefined {
    return answer(v.conn, v.head, res, v.startedAt);
  }

  function request(conn: HttpConnection, head: RequestHead, text: string | undefined): void {
    const v = new HttpVisit(conn, head, text, performance.now());
    // without X-Forwarded-For the client is the peer, whose canonical form the connection keeps
    const forwardedFor = v.get("x-forwarded-for");
    const client = forwardedFor === null ? (conn.peerClient ??= deps.trustedProxies.clientAddress(conn.peer.address, null)) : deps.trustedProxies.clientAddress(conn.peer.address, forwardedFor);
    v.client = client;
    conn.client = client;
    if (conn.counted === undefined) {
      // the connection takes its place in the budget with its first request, for the client it is
      if (!deps.budget.admit(client)) {
        overLimit("visitor connection refused", { client, limit: deps.budget.refusal(client) === "address" ? "max-conns-per-ip" : "max-conns" });
        deps.counters.request(HTTP_REQUEST, 503, v.startedAt);
        void conn.answer(overloadedPage(), head, false);
        return;
      }
      conn.counted = client;
    }
    try {
      const waiting = route(v);
      if (waiting) {
        // the head's bytes are the socket's: what reads it after this turn reads its text
        v.keepText();
        failsOn(waiting, v);
      }
    } catch (err) {
      failed(v, err);
    }
  }

  /** A route that waited and then threw (a function of its own: a closure in request() would cost every request a scope). */
  function failsOn(waiting: Promise<void>, v: HttpVisit): void {
    waiting.catch((err) => failed(v, err));
  }

  function failed(v: HttpVisit, err: unknown): void {
    clientFault("edge request failed", { err: String(err) });
    if (!v.conn.busy) answered(v, new Response("internal error\n", { status: 500 }));
  }

  /** Routes a request: at once in the usual case; a promise when it must wait (a restart's held name, another node, sign-in). */
  function route(v: HttpVisit): void | Promise<void> {
    const { conn, head } = v;
    // the connection's last Host, read once: the next request sends the same one, as a rule
    const known = conn.hostRoute;
    const hostSaid = known !== undefined && known.raw === head.host ? known : hostRoute(head.host, deps.domain);
    if (!hostSaid) {
      clientFault("bad request refused", { why: "host header", remote: v.client });
      return answered(v, badRequestPage("The Host header does not name a valid host."));
    }
    conn.hostRoute = hostSaid;
    const { hostHeader, custom } = hostSaid;
    v.hostHeader = hostHeader;
    // a custom hostname is a tunnel's name as it is (it has dots; a subdomain never)
    const name = custom !== undefined && !isAgentsPath(head.target) ? custom : hostSaid.name;

    if (name === undefined || (custom === undefined && name.includes("."))) {
      const question = head.target.indexOf("?");
      const path = question < 0 ? head.target : head.target.slice(0, question);
      if (path === CONNECT_PATH || path === NODE_PATH) {
        if (head.upgrade === "websocket") return handOver(conn, head, v.text, v.client, path === CONNECT_PATH);
        // not a WebSocket: answered here, and the connection stays the edge's (a hand-over is for good);
        // a GET of the agents' path asks where the direct port is
        if (path === CONNECT_PATH && head.method === "GET") return answered(v, directPortAnswer(deps.directPort?.()));
        return answered(v, upgradeRequired());
      }
      // an agent's check: its JSON body is read by the loopback server (agent-check.ts)
      if (path === CHECK_PATH) return handOverCheck(conn, head, v.text, v.client);
      if (hostSaid.apex) {
        const apex = deps.apex?.();
        if (apex) return handOverToApex(conn, head, v.text, v.client, apex);
      }
      return answered(v, name === undefined ? landingPage(deps.domain) : unknownTunnelPage(hostHeader));
    }

    v.name = name;
    return judge(door, v);
  }

  /** The agents' and nodes' paths: answered by the edge on any host that is no tunnel's subdomain. */
  function isAgentsPath(target: string): boolean {
    const question = target.indexOf("?");
    const path = question < 0 ? target : target.slice(0, question);
    return path === CONNECT_PATH || path === NODE_PATH || path === CHECK_PATH;
  }

  /** An agent's or another node's WebSocket: it leaves the visitors' budget for the loopback server. */
  function handOver(conn: HttpConnection, head: RequestHead, text: string, client: string, agent: boolean): undefined {
    if (agent && !deps.admitAgent(client)) return answer(conn, head, overloadedPage(), performance.now());
    if (conn.counted !== undefined) {
      deps.budget.release(conn.counted);
      conn.counted = undefined;
    }
    const visit = { peer: `${conn.peer.address}:${conn.peer.port}`, client, agent };
    deps.loopback().handOver(conn, `${headAsJudged(text, head)}\r\n\r\n`, visit, () => {
      if (agent) deps.releaseAgent(client);
    });
    return undefined;
  }

  /**
   * An agent's check: answered by the loopback server, which reads its body,
   * then closes (agent-check.ts answers with Connection: close). The
   * connection keeps its place in the visitors' budget until it closes
   * (closed() gives it back), as the portal's do.
   */
  function handOverCheck(conn: HttpConnection, head: RequestHead, text: string, client: string): undefined {
    const visit = { peer: `${conn.peer.address}:${conn.peer.port}`, client, agent: false };
    deps.loopback().handOver(conn, `${headAsJudged(text, head)}\r\n\r\n`, visit, () => {});
    return undefined;
  }

  /**
   * A request for the domain itself, with the portal on: the connection goes
   * to the portal's loopback server for good, keeping its place in the
   * visitors' budget until it closes (closed() gives it back). A browser
   * sends only the apex's requests on it; a proxy in front pools its
   * connections over every name, so through one the portal closes each
   * connection after its answer (`proxied`).
   */
  function handOverToApex(conn: HttpConnection, head: RequestHead, text: string, client: string, apex: Loopback<undefined>): undefined {
    const visit = { peer: `${conn.peer.address}:${conn.peer.port}`, client, agent: false, proxied: deps.trustedProxies.trusts(conn.peer.address) };
    apex.handOver(conn, `${headAsJudged(text, head)}\r\n\r\n`, visit, () => {});
    return undefined;
  }

  function closed(conn: HttpConnection): void {
    if (conn.counted === undefined) return;
    deps.budget.release(conn.counted);
    conn.counted = undefined;
  }

  // an HTTP/2 connection's streams: the same routes and door rules, each stream a request
  const http2 = deps.http2 && h2Visitors({ ...deps, ...deps.http2, portal: () => deps.apex?.() !== undefined, directPortAnswer: () => directPortAnswer(deps.directPort?.()) });

  // the fields the routes read: X-Forwarded-For, the warning's, those the edge sets itself
  return { request, refused, closed, fieldLengths: EDGE_READS, http2 };
}
