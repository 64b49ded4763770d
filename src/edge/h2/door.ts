/**
 * The HTTP door for HTTP/2 streams (edge/judgement/pipeline.ts, door
 * "h2"): each stream is one visit, named, admitted and judged by the HTTP
 * door's own rules (http-door.ts: the Host made normal, the kinds it
 * reaches, IP rules, sign-in, the warning), on the request as the HTTP/1.1
 * head the stream becomes (http2/http1.ts). Only its carrier differs: it
 * forwards on an "h1" stream (exchange.ts) and answers on the
 * HTTP/2 stream (the `answered` it is given).
 */
import type { Passed } from "../access/policy.ts";
import { HttpDoor, type HttpDoorDeps, type HttpVisit } from "../http-door.ts";
import type { Tunnel } from "../registry.ts";
import { forwardStream } from "./exchange.ts";
import type { H2Visit } from "./visit.ts";

export class H2Door extends HttpDoor {
  constructor(deps: HttpDoorDeps) {
    super(deps, "h2");
  }

  override forward(v: HttpVisit, t: Tunnel, passed: Passed | undefined): void {
    const visit = v as H2Visit;
    if (visit.stream.isClosed || v.conn.closedAlready) return;
    forwardStream(visit, visit.session, t, this.context(v, passed), this.deps.answered);
  }
}
