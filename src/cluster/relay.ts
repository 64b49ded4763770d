/**
 * Node-to-node relay: a visitor reaching node A for a tunnel whose agent is
 * on node B is served through a link from A to B. The link is what an
 * agent's connection is, turned around: the same frames, mux and credit
 * windows, over a WebSocket that A opens to B's --node-url (NODE_PATH,
 * authenticated by node-auth.ts). A opens a stream per visitor request as
 * it would to an agent; B joins it to a stream to the tunnel's agent.
 *
 * Traffic is counted once, by A, the node the visitor is on (its meter
 * writes to the shared traffic table like any other).
 */
import { webSocketLink, type Link } from "../sockets/links.ts";
import { databaseUnavailable } from "../db/unavailable.ts";
import { log } from "../log.ts";
import { readOpenMeta, type OpenMeta, type RelayedMeta } from "../protocol/messages.ts";
import type { LayeredRun } from "../edge/traffic-policy/layered-run.ts";
import type { TunnelPolicy } from "../edge/traffic-policy/tunnel-policy.ts";
import { breakersEnded, breakersWait } from "../edge/traffic-policy/breaker-outcomes.ts";
import type { ReadBody } from "../edge/traffic-policy/request-body.ts";
import { filterRelayedResponse } from "../edge/traffic-policy/relayed-response.ts";
import { ResponseFilter } from "../edge/traffic-policy/response-filter.ts";
import { requestToTell, toldWhenAnswered } from "../edge/traffic-policy/passed-notes.ts";
import { Mux, type SendResult, type Stream } from "../protocol/mux.ts";
import { DEAD_AFTER_MS, WireError } from "../protocol/wire.ts";
import type { AgentLink, Registry, Tunnel } from "../edge/registry.ts";
import { nodeAuthorization, NODE_PATH } from "./node-auth.ts";
import { openStream } from "../edge/open-stream.ts";
import { joinStreams, refuseRelayed } from "./stream-pipe.ts";
import { readPrivateRowName } from "../edge/private-streams.ts";
import { judge, type Door, type Visit } from "../edge/judgement/pipeline.ts";
import { staysWhileOpen } from "../edge/judgement/live-visits.ts";
import { RelayedHttpDoor, relayedClient, RelayedPrivateDoor, RelayedTlsDoor, type RelayedPrivateVisit, type RelayedRun, type RelayForward } from "./relayed-doors.ts";
import { relayedJudgedBy } from "./relayed-subject.ts";
import { judgedSince } from "../edge/traffic-policy/live-rejudge.ts";

/** How long a node waits for another to answer its link. */
const CONNECT_TIMEOUT_MS = 5_000;

/** B's side: streams from another node, each joined to one of this node's tunnels. */
export class RelayIn {
  readonly mux: Mux;

  constructor(
    readonly fromNode: string,
    send: (frames: Uint8Array) => SendResult,
    close: (reason: string) => void,
    registry: Registry,
  ) {
    this.mux = new Mux({
      role: "agent",
      batchWrites: true,
      send,
      onStream: (down) => this.relay(down),
      onClose: (code) => {
        if (code === WireError.KEEPALIVE_TIMEOUT) log.warn("relay link from another node silent too long, closing", { node: fromNode });
        close(code.slice(0, 100));
      },
    });
    // the link is open: should the other node stop answering, this end goes too
    this.mux.keepAlive();
    const onward: RelayForward = (down, t, meta, judgedWith, rewriteFor, policy, body) => this.forward(down, t, meta, judgedWith, rewriteFor, policy, body);
    this.httpDoor = new RelayedHttpDoor(registry, onward);
    this.tlsDoor = new RelayedTlsDoor(registry, onward);
    this.privateDoor = new RelayedPrivateDoor(registry);
  }

  /** A stream from the other node: a visit, through the judgement's steps by the door of its kind (relayed-doors.ts). */
  private relay(down: Stream): void {
    const meta = readOpenMeta(down.meta) as RelayedMeta | undefined;
    if (!meta) return refuseRelayed(down);
    const priv = readPrivateRowName(meta.tunnel);
    if (priv) {
      const c = meta.connector;
      if (typeof c !== "object" || c === null || !Number.isInteger(c.id) || typeof c.username !== "string" || c.username.length > 64) return refuseRelayed(down);
      if (c.token !== undefined && !Number.isInteger(c.token)) return refuseRelayed(down);
      const v: RelayedPrivateVisit = {
        client: relayedClient(meta),
        connector: { userId: c.id, username: c.username, ...(c.token !== undefined ? { tokenId: c.token } : {}) },
        kind: meta.kind,
        remote: meta.remote,
        ...(meta.local !== undefined ? { local: meta.local } : {}),
        down,
        ownerId: priv.ownerId,
        privateName: priv.name,
      };
      return this.judged(this.privateDoor, v, (err) => {
        log.warn("relayed connector's stream not judged", { node: this.fromNode, err: String(err) });
        down.reset(databaseUnavailable(err) ? "DATABASE_UNAVAILABLE" : WireError.UPSTREAM_FAILED);
      });
    }
    const door = meta.kind === "tls" ? this.tlsDoor : this.httpDoor;
    this.judged(door, { client: relayedClient(meta), down, meta }, (err) => {
      log.error("relayed request failed", { node: this.fromNode, err: String(err) });
      refuseRelayed(down);
    });
  }

  private judged<V extends Visit>(door: Door<V>, v: V, failed: (err: unknown) => void): void {
    try {
      judge(door, v)?.catch(failed);
    } catch (err) {
      failed(err);
    }
  }

  private readonly httpDoor: RelayedHttpDoor;
  private readonly tlsDoor: RelayedTlsDoor;
  private readonly privateDoor: RelayedPrivateDoor;

  /**
   * `judgedWith`: the tunnel's layers its judgement began with (RelayForward).
   * `rewriteFor`: the request's method, when `policy`, its traffic policies' run (its flags' response header rules
   * among them), ran here: the response passes their filter when they judge it, or when the agent is told what
   * its request rules did (passed-notes.ts); `body`: the request's body, read here for the policies.
   */
  private forward(down: Stream, t: Tunnel, meta: RelayedMeta, judgedWith: TunnelPolicy | undefined, rewriteFor?: string, policy?: RelayedRun, body?: ReadBody): void {
    const { client: _, warn: __, sni: ___, ja4: ____, ...forAgent } = meta;
    const up = t.agent?.openStream({ ...forAgent, tunnel: t.id });
    if (!up) {
      if (policy) breakersEnded(policy.run);
      return refuseRelayed(down);
    }
    // a body the policies read (its credit given as it was read): on to the agent before the stream's own bytes
    if (body) for (const chunk of body.raw) up.write(chunk);
    // the tunnel's agent is told what its policies did with the request once its response is judged here (passed-notes.ts)
    if (policy) toldWhenAnswered(policy.run, t, up.id);
    // a circuit breaker is told the response's status, read here (the filter's head), or that none came
    const breakers = policy !== undefined && breakersWait(policy.run);
    if (breakers) up.whenReset(() => breakersEnded(policy.run));
    if (policy && t.policy && rewriteFor !== undefined && (t.policy.response || requestToTell(policy.run) || breakers)) {
      // the response through the tunnel's on_http_response, here where its rules live
      joinStreams(down, up);
      const layers = t.policy;
      filterRelayedResponse(down, up, rewriteFor, (out) => new ResponseFilter(layers, policy.run, rewriteFor, policy.minor, out));
    } else joinStreams(down, up);
    // judged again when the tunnel's rules narrow: by its IP rules, and by its policies on the head they judged
    const kept = staysWhileOpen(t, relayedClient(meta), down, relayedJudgedBy(t, meta, policy ? policy.judged : meta.head));
    // its layers changed while its judgement waited (a request's or a tls connection's): those of now judge it
    judgedSince(t, kept, judgedWith);
    // a pool member's requests in flight count those other nodes relay too (least-requests)
    if (t.pool) countInFlight(t, up);
  }
}

/** `t` has one more request (or connection) in flight until the agent's side of `up` ends or is reset. */
function countInFlight(t: Tunnel, up: Stream): void {
  t.inFlight++;
  let counted = true;
  const done = () => {
    if (!counted) return;
    counted = false;
    t.inFlight--;
  };
  up.whenReset(done);
  const ended = up.onEnd;
  up.onEnd = () => {
    done();
    ended?.();
  };
}

/**
 * A's side: one link per other node, made when a visitor first needs it and
 * made again after it drops. A link whose other end stops answering (a
 * middlebox that keeps the connection and forwards nothing) is found by the
 * mux's keepalive within DEAD_AFTER_MS and dropped; the next visitor makes
 * a new one.
 */
export class RelayOut {
  private readonly links = new Map<string, Promise<Mux | undefined>>();

  constructor(
    private readonly nodeId: string,
    private readonly secret: string,
  ) {}

  /** What the edge opens a visitor's stream on, as it would on an agent's connection. */
  agentFor(mux: Mux, target: { subdomain: string; userId: number; tokenId: number; nodeId: string }): AgentLink {
    return {
      sessionId: `node:${target.nodeId}`,
      userId: target.userId,
      tokenId: target.tokenId,
      openStream(meta: OpenMeta, end?: boolean) {
        if (mux.closed) return undefined;
        return openStream(mux, { ...meta, tunnel: target.subdomain }, end ?? false, { node: target.nodeId });
      },
      refuse() {},
    };
  }

  /** The link to `nodeId` at `url`, or undefined when it cannot be made now. */
  link(nodeId: string, url: string): Promise<Mux | undefined> {
    const known = this.links.get(nodeId);
    if (known) return known;
    // only this link's own end forgets it: a link made since in its place stays
    const forget = () => {
      if (this.links.get(nodeId) === made) this.links.delete(nodeId);
    };
    const made = this.connect(nodeId, url, forget);
    this.links.set(nodeId, made);
    void made.then((mux) => {
      if (!mux) forget();
    });
    return made;
  }

  private connect(nodeId: string, url: string, gone: () => void): Promise<Mux | undefined> {
    const wsUrl = url.replace(/^http/, "ws") + NODE_PATH;
    return new Promise((resolve) => {
      let link: Link;
      try {
        link = webSocketLink(wsUrl, { headers: { Authorization: nodeAuthorization(this.secret, this.nodeId) } });
      } catch (err) {
        log.warn("relay link not made", { node: nodeId, err: String(err) });
        return resolve(undefined);
      }
      let up = false;
      const down = (why: string) => {
        if (!up) return;
        up = false;
        gone();
        log.info("relay link down", { node: nodeId, why });
      };
      const mux = new Mux({
        role: "edge",
        batchWrites: true,
        send: (frames) => link.send(frames),
        onClose: (code) => {
          if (code !== WireError.KEEPALIVE_TIMEOUT) return link.close();
          // the other node does not answer: no closing handshake would come back either
          down(`no sign of life for ${DEAD_AFTER_MS / 1000} s`);
          link.terminate();
        },
      });
      const timer = setTimeout(() => {
        link.terminate();
        resolve(undefined);
      }, CONNECT_TIMEOUT_MS);
      link.onMessage = (frames) => mux.receive(frames);
      link.onDrain = () => mux.drained();
      link.onOpen = () => {
        clearTimeout(timer);
        up = true;
        mux.keepAlive();
        log.info("relay link up", { node: nodeId });
        resolve(mux);
      };
      link.onClose = (why) => {
        clearTimeout(timer);
        mux.close();
        down(why);
        resolve(undefined);
      };
    });
  }

  close(): void {
    for (const made of this.links.values()) void made.then((mux) => mux?.close());
    this.links.clear();
  }
}
