/**
 * The HTTP door for HTTP/2 streams (edge/judgement/pipeline.ts, door
 * "h2"): each stream is one visit, named, admitted and judged by the HTTP
 * door's own rules (http-door.ts: the Host made normal, the kinds it
 * reaches, IP rules, sign-in, the warning), on the request as the HTTP/1.1
 * head the stream becomes (http2/http1.ts). Only its carrier differs: it
 * forwards on an "h1" stream (exchange.ts) and answers on the
 * HTTP/2 stream (the `answered` it is given).
 */
import type { OpenMeta, RelayedMeta } from "../../protocol/messages.ts";
import { relayedConnection } from "../traffic-policy/node-region.ts";
import type { RequestHead } from "../../http/request-head.ts";
import { requestHeadText, type ForwardContext } from "../forward.ts";
import { HttpDoor, type HttpDoorDeps, type HttpVisit } from "../http-door.ts";
import { Refusal } from "../judgement/pipeline.ts";
import { badGatewayPage } from "../pages.ts";
import type { Tunnel } from "../registry.ts";
import { RequestStream } from "../request-stream.ts";
import { bodyRefusal, type BodyReading, type ReadBody } from "../traffic-policy/request-body.ts";
import { PolicyClosed } from "../traffic-policy/policy-closed.ts";
import { readH2Body } from "../traffic-policy/stream-body.ts";
import { replacedBody, replaceStreamBody } from "../traffic-policy/replaced-body.ts";
import { breakersEnded } from "../traffic-policy/breaker-outcomes.ts";
import { H2Exchange, type Answered } from "./exchange.ts";
import type { H2Session } from "./session.ts";
import type { H2Visit } from "./visit.ts";

export class H2Door extends HttpDoor {
  constructor(deps: HttpDoorDeps) {
    super(deps, "h2");
  }

  override forward(v: HttpVisit, t: Tunnel): void {
    const visit = v as H2Visit;
    if (visit.stream.isClosed || v.conn.closedAlready) return;
    // request-body-find-replace rewrote the body: the new one goes in place of the one read (exchange.ts sends it first)
    const replaced = replacedBody(v.policy);
    if (replaced && visit.body) replaceStreamBody(visit.head, visit.body, replaced);
    const ctx = this.context(v);
    // the tunnel's response rules judge the stream's response on its way (exchange.ts, judged-response.ts)
    forwardStream(visit, visit.session, t, ctx, this.deps.answered);
  }

  /** The stream's body for the actions that read it, taken from its DATA (stream-body.ts) and sent on first by H2Exchange. */
  protected override async readBody(v: HttpVisit, _t: Tunnel, head: RequestHead, reading: BodyReading): Promise<ReadBody | Refusal> {
    const visit = v as H2Visit;
    const read = await readH2Body(visit.stream, head, reading);
    if (!(typeof read === "object" && "raw" in read)) return bodyRefusal(read);
    visit.body = read;
    return read;
  }

  override refuse(v: HttpVisit, r: Refusal): void {
    if (r instanceof PolicyClosed) return (v as H2Visit).closedByPolicy();
    super.refuse(v, r);
  }
}

/**
 * Forwards `v`'s stream through `tunnel`'s agent, or answers the 502 page
 * when the agent cannot take it. A tunnel stream the connection kept from an
 * earlier request to the same tunnel carries it when there is one (its head
 * as DATA, as a kept-alive HTTP/1.1 connection's next request goes:
 * request-stream.ts); else a new one, kept after it when its agent keeps
 * streams.
 */
function forwardStream(v: H2Visit, session: H2Session, tunnel: Tunnel, ctx: ForwardContext, answered: Answered): void {
  const head = requestHeadText(v.head, tunnel, ctx, v.text, v.conn);
  const parked = session.takeParked(tunnel);
  if (parked) return new H2Exchange(v, session, tunnel, ctx, parked, answered).start(Buffer.from(head, "latin1"));
  const agent = tunnel.agent;
  const meta: OpenMeta = { tunnel: tunnel.id, kind: "h1", remote: `${ctx.remoteIp}:${ctx.remotePort}`, head };
  // another node's tunnel: its access rules are applied there, on the visitor's address as judged here
  if (tunnel.relayed) {
    (meta as RelayedMeta).client = ctx.client;
    if (ctx.warn) (meta as RelayedMeta).warn = true;
    relayedConnection(meta as RelayedMeta, v.conn);
  }
  const keep = agent?.keeps === true;
  if (keep) meta.keep = true;
  const stream = agent?.openStream(meta, !keep && !v.stream.hasBody);
  if (!stream) {
    breakersEnded(ctx.policy);
    return answered(v, badGatewayPage(ctx.host, "its agent is reconnecting or busy"));
  }
  new H2Exchange(v, session, tunnel, ctx, new RequestStream(stream, tunnel, agent!, keep), answered).start(undefined);
}
