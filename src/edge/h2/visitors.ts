/**
 * Visitors that speak HTTP/2 on the public port (ALPN h2 with TLS, the
 * preface on a plain port): each connection is an H2Session, and each of
 * its streams one request, routed as visitor-requests.ts routes an
 * HTTP/1.1 one: made the HTTP/1.1 head it stands for (http2/http1.ts,
 * parsed by the same parser, refused with the same statuses), its client
 * read (a trusted proxy's X-Forwarded-For), the connection's place in the
 * budget taken with its first stream, then a tunnel's name through the
 * judgement's HTTP door for streams (door.ts), or the edge's own answer.
 *
 * What the edge serves only over HTTP/1.1 (the portal, handed a whole
 * connection; the agents' and nodes' WebSockets) is answered 421
 * Misdirected Request: a browser that sent it on a connection it opened
 * for another name tries again on a connection of its own, which is
 * offered HTTP/1.1 only (the domain itself is never offered h2 by ALPN).
 */
import type { TrustedProxies } from "../../http/addresses.ts";
import { http1Request, isHttp1Refusal } from "../../http2/http1.ts";
import type { Http2Limits } from "../../http2/limits.ts";
import type { H2Stream } from "../../http2/stream.ts";
import { ErrorCode } from "../../http2/wire.ts";
import { limitedLog } from "../../log.ts";
import { H2_REQUEST, type EdgeCounters } from "../../metrics/edge-counters.ts";
import { CONNECT_PATH, NODE_PATH } from "../../protocol/wire.ts";
import type { SocketBudget } from "../../sockets/socket-budget.ts";
import { EDGE_READS } from "../forward.ts";
import { hostRoute } from "../host-route.ts";
import type { HttpConnection } from "../http-connection.ts";
import type { HttpDoorDeps, HttpVisit } from "../http-door.ts";
import { judge } from "../judgement/pipeline.ts";
import { badRequestPage, landingPage, overloadedPage, page, unknownTunnelPage } from "../pages.ts";
import { answerStream } from "./answer.ts";
import { H2Door } from "./door.ts";
import { H2Session } from "./session.ts";
import { H2Visit } from "./visit.ts";

/** Malformed requests are the sender's fault: a few lines a minute. */
const clientFault = limitedLog(20);
const overLimit = limitedLog(10);

export interface H2VisitorDeps extends Omit<HttpDoorDeps, "answered"> {
  domain: string;
  budget: SocketBudget;
  trustedProxies: TrustedProxies;
  counters: EdgeCounters;
  limits: Http2Limits;
  /** --max-request-fields, as for an HTTP/1.1 head. */
  maxFields?: number;
  /** The portal answers on the domain itself. */
  portal(): boolean;
  /** The answer to GET of the agents' path: where the direct port is. */
  directPortAnswer(): Response;
}

/** A Misdirected Request: what this name or path needs is served on an HTTP/1.1 connection. */
function misdirected(host: string): Response {
  return page(421, "Misdirected request", `<div class="status">421</div><h1>Not on this connection</h1><p>${host} is served over HTTP/1.1: connect again without HTTP/2.</p>`);
}

/** Takes a connection whose visitor speaks HTTP/2, with what was read of it already. */
export function h2Visitors(deps: H2VisitorDeps): (conn: HttpConnection, first: Uint8Array[]) => void {
  const door = new H2Door({ ...deps, answered: (v, res) => answered(v as H2Visit, res) });

  function answer(stream: H2Stream, method: string, res: Response, startedAt: number): void {
    deps.counters.request(H2_REQUEST, res.status, startedAt);
    void answerStream(stream, res, method === "HEAD");
  }

  function answered(v: HttpVisit & { stream?: H2Stream }, res: Response): void {
    answer(v.stream!, v.method, res, v.startedAt);
  }

  function request(stream: H2Stream, session: H2Session): void {
    const startedAt = performance.now();
    const { conn } = session;
    // the HTTP/1.1 head the agent will get, parsed as a visitor's: every rule an HTTP/1.1 request meets, in one place
    const made = http1Request(stream.request, stream.hasBody, EDGE_READS, deps.maxFields);
    if (isHttp1Refusal(made)) {
      clientFault("bad request refused", { why: made.why, remote: conn.peer.address });
      return answer(stream, stream.request.method, page(made.status, "Bad request", `<div class="status">${made.status}</div><h1>Bad request</h1><p>${made.why}</p>`), startedAt);
    }
    const v = new H2Visit(conn, made.head, made.text, startedAt, stream, session);
    const client = deps.trustedProxies.clientAddress(conn.peer.address, v.get("x-forwarded-for"));
    v.client = client;
    if (conn.counted === undefined) {
      // the connection takes its place in the budget with its first request, for the client it is
      if (!deps.budget.admit(client)) {
        overLimit("visitor connection refused", { client, limit: deps.budget.refusal(client) === "address" ? "max-conns-per-ip" : "max-conns" });
        session.goAway();
        return answered(v, overloadedPage());
      }
      conn.counted = client;
      conn.client = client;
    }
    try {
      const waiting = route(v);
      if (waiting) waiting.catch((err) => failed(v, err));
    } catch (err) {
      failed(v, err);
    }
  }

  function failed(v: H2Visit, err: unknown): void {
    clientFault("edge request failed", { err: String(err) });
    if (!v.stream.responded) answered(v, new Response("internal error\n", { status: 500 }));
    else v.stream.reset(ErrorCode.INTERNAL_ERROR);
  }

  /** A stream's route, as visitor-requests.ts routes a request: a tunnel's name to the judgement, the rest the edge's own. */
  function route(v: H2Visit): void | Promise<void> {
    const { head, conn } = v;
    const known = conn.hostRoute;
    const hostSaid = known !== undefined && known.raw === head.host ? known : hostRoute(head.host, deps.domain);
    if (!hostSaid) {
      clientFault("bad request refused", { why: "host header", remote: v.client });
      return answered(v, badRequestPage("The Host header does not name a valid host."));
    }
    conn.hostRoute = hostSaid;
    const { hostHeader, custom } = hostSaid;
    v.hostHeader = hostHeader;
    const question = head.target.indexOf("?");
    const path = question < 0 ? head.target : head.target.slice(0, question);
    const agentsPath = path === CONNECT_PATH || path === NODE_PATH;
    // a custom hostname is a tunnel's name as it is (it has dots; a subdomain never)
    const name = custom !== undefined && !agentsPath ? custom : hostSaid.name;
    if (name === undefined || (custom === undefined && name.includes("."))) {
      // where the direct port is: a plain GET, answered on any connection; a WebSocket needs HTTP/1.1
      if (agentsPath) return answered(v, path === CONNECT_PATH && head.method === "GET" ? deps.directPortAnswer() : misdirected(hostHeader));
      if (hostSaid.apex && deps.portal()) return answered(v, misdirected(hostHeader));
      return answered(v, name === undefined ? landingPage(deps.domain) : unknownTunnelPage(hostHeader));
    }
    v.name = name;
    return judge(door, v);
  }

  return (conn, first) => {
    const session = new H2Session(conn, deps.limits, request);
    for (const bytes of first) if (bytes.byteLength > 0) session.data(bytes);
  };
}
