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
import type { AppError } from "../core/errors.ts";
import { databaseUnavailable } from "../db/unavailable.ts";
import { log } from "../log.ts";
import { canonicalAddress } from "../http/addresses.ts";
import { isRefusal, parseRequestHead } from "../http/request-head.ts";
import { responseBytes } from "../http/response-bytes.ts";
import { responseHeadBytes, type ParsedHead } from "../http/response-head.ts";
import { headAllowedToSwitch } from "../http/upgrade.ts";
import { ResponseParser } from "../http/response-reader.ts";
import { readOpenMeta, type OpenMeta, type RelayedMeta } from "../protocol/messages.ts";
import type { AccessPolicy } from "../edge/access/policy.ts";
import { Mux, type SendResult, type Stream } from "../protocol/mux.ts";
import { DEAD_AFTER_MS, WireError } from "../protocol/wire.ts";
import type { AgentLink, Registry, Tunnel } from "../edge/registry.ts";
import { nodeAuthorization, NODE_PATH } from "./node-auth.ts";
import { warningFor } from "../edge/warning.ts";
import { openStream } from "../edge/open-stream.ts";
import { joinStreams, refuseRelayed } from "./stream-pipe.ts";
import { openToPrivate, readPrivateRowName } from "../edge/private-streams.ts";

/** How long a node waits for another to answer its link. */
const CONNECT_TIMEOUT_MS = 5_000;

/** B's side: streams from another node, each joined to one of this node's tunnels. */
export class RelayIn {
  readonly mux: Mux;

  constructor(
    readonly fromNode: string,
    send: (frames: Uint8Array) => SendResult,
    close: (reason: string) => void,
    private readonly registry: Registry,
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
  }

  private relay(down: Stream): void {
    const meta = readOpenMeta(down.meta) as RelayedMeta | undefined;
    if (meta?.kind === "tls") return this.relayTls(down, meta);
    const priv = meta && readPrivateRowName(meta.tunnel);
    if (priv) return this.relayPrivate(down, meta!, priv);
    // `tunnel` names the subdomain between nodes (a tunnel's id is its own node's)
    const t = meta && meta.kind !== "tcp" && meta.head ? localMember(this.registry.tunnelBySubdomain(meta.tunnel)) : undefined;
    if (!t || !meta) return refuseRelayed(down);
    // a switch this tunnel does not allow is taken off here: the visitor's node passes every one on, for its agent's node to judge
    meta.head = headAllowedToSwitch(meta.head!, t.allowUpgrade);
    if (!t.access) {
      if (meta.warn && !t.skipWarning) return void answer(down, warningFor(visitedHost(meta), t.username, visitedTarget(meta)), false).catch(() => refuseRelayed(down));
      return this.forward(down, t, meta);
    }
    void this.admitted(down, t, meta).catch((err) => {
      log.error("relayed request failed", { node: this.fromNode, err: String(err) });
      refuseRelayed(down);
    });
  }

  /**
   * A visitor's TLS connection for a tls tunnel of this node, undecrypted,
   * hello first: the tunnel's IP rules judge the address the visitor's node
   * saw, then it is one stream to the agent, as on one node.
   */
  private relayTls(down: Stream, meta: RelayedMeta): void {
    const t = this.registry.tunnelBySubdomain(meta.tunnel);
    if (!t || t.protocol !== "tls") return refuseRelayed(down);
    const client = canonicalAddress(meta.client ?? meta.remote.slice(0, meta.remote.lastIndexOf(":")));
    if (t.access?.refusesAddress(client)) return refuseRelayed(down);
    this.forward(down, t, meta);
  }

  /**
   * A connector on the other node to a private tunnel of this one: its
   * rules asked here, where the tunnel and its shares are (edge/private-streams.ts).
   */
  private relayPrivate(down: Stream, meta: RelayedMeta, priv: { ownerId: number; name: string }): void {
    const c = meta.connector;
    if (typeof c !== "object" || c === null || !Number.isInteger(c.id) || typeof c.username !== "string" || c.username.length > 64) return refuseRelayed(down);
    if (c.token !== undefined && !Number.isInteger(c.token)) return refuseRelayed(down);
    const join = (refusal: AppError | undefined) => {
      if (refusal) return down.reset(refusal.code);
      const up = openToPrivate(this.registry.privateTunnel(priv.ownerId, priv.name), { userId: c.id, username: c.username }, meta.kind, meta.remote, meta.local);
      if (typeof up === "string") return down.reset(up);
      joinStreams(down, up);
    };
    // each stream is judged by the rules as they are now (the connector's token and user, the share, its protocol), here
    const standing = this.registry.judge?.connector({ userId: c.id, ...(c.token !== undefined ? { tokenId: c.token } : {}) }, priv.ownerId, priv.name);
    if (!(standing instanceof Promise)) return join(standing);
    standing.then(
      (refusal) => {
        if (!down.isClosed) join(refusal);
      },
      (err) => {
        log.warn("relayed connector's stream not judged", { node: this.fromNode, err: String(err) });
        down.reset(databaseUnavailable(err) ? "DATABASE_UNAVAILABLE" : WireError.UPSTREAM_FAILED);
      },
    );
  }

  /**
   * The tunnel's access rules, applied here where they live (IP rules on the
   * address the visitor's node judged, basic auth, OIDC with this node's
   * keys, header rules): a refusal is answered on the stream as the visitor's
   * response; a visitor let through goes on to the agent.
   */
  private async admitted(down: Stream, t: Tunnel, meta: RelayedMeta): Promise<void> {
    const policy = t.access!;
    const head = parseRequestHead(meta.head!.slice(0, -4));
    if (isRefusal(head)) return refuseRelayed(down); // the visitor's node parsed it: this is no head it sent
    const view = fieldsOf(head.fields);
    const host = view.get("x-forwarded-host") ?? meta.tunnel;
    const secure = view.get("x-forwarded-proto") === "https";
    const origin = `${secure ? "https" : "http"}://${host}`;
    const url = new URL(`${origin}${head.target === "*" ? "/" : head.target}`);
    const headers = new Headers();
    for (const [name, value] of head.fields) headers.append(name, value);
    const req = new Request(url.href, { method: head.method, headers });
    const client = meta.client ?? meta.remote.slice(0, meta.remote.lastIndexOf(":"));
    const verdict = await policy.admit(req, url, client, host, secure);
    if (down.isClosed) return;
    if (verdict instanceof Response) return answer(down, verdict, head.method === "HEAD");
    // let through: the warning, if the visitor's node found it due, comes now (after sign-in, as on one node)
    if (meta.warn && !t.skipWarning) return answer(down, warningFor(host, t.username, head.target), head.method === "HEAD");
    const fields = [...head.fields];
    policy.rewriteRequest(fields, verdict);
    let text = `${head.method} ${head.target} HTTP/1.${head.minor}\r\n`;
    for (const [name, value] of fields) text += `${name}: ${value}\r\n`;
    this.forward(down, t, { ...meta, head: `${text}\r\n` }, policy.rewritesResponse ? head.method : undefined);
  }

  /** `rewriteFor`: the request's method, when the tunnel's header rules change the response's head here. */
  private forward(down: Stream, t: Tunnel, meta: RelayedMeta, rewriteFor?: string): void {
    const { client: _, warn: __, ...forAgent } = meta;
    const up = t.agent?.openStream({ ...forAgent, tunnel: t.id });
    if (!up) return refuseRelayed(down);
    joinStreams(down, up, rewriteFor === undefined ? undefined : rewrittenResponse(rewriteFor, t.access!));
    // a pool member's requests in flight count those other nodes relay too (least-requests)
    if (t.pool) countInFlight(t, up);
  }
}

/**
 * The tunnel a relayed request for a name goes to here: the name's own, or
 * one of this node's members of its pool, in turn. A request sent before
 * the other node learned that this node's members left the rotation (a
 * rolling restart) still goes to one whose agent is connected: it serves
 * what comes until it leaves (and has heard READY: a member joining is not
 * sent anything before).
 */
function localMember(t: Tunnel | undefined): Tunnel | undefined {
  if (!t?.pool) return t;
  return t.pool.pick() ?? t.pool.members.find((m) => m.agent && m.announced);
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

/** A head's fields as the warning reads them: a name's values joined, null when absent. */
function fieldsOf(fields: [string, string][]): { get(name: string): string | null } {
  return {
    get(name: string): string | null {
      const values = fields.filter(([n]) => n.toLowerCase() === name).map(([, v]) => v);
      return values.length ? values.join(", ") : null;
    },
  };
}

/** The host the visitor asked for, as the visitor's node passed it on. */
function visitedHost(meta: RelayedMeta): string {
  const head = parseRequestHead(meta.head!.slice(0, -4));
  return (isRefusal(head) ? undefined : fieldsOf(head.fields).get("x-forwarded-host")) ?? meta.tunnel;
}

/** The request target of a relayed head. */
function visitedTarget(meta: RelayedMeta): string {
  const line = meta.head!.slice(0, meta.head!.indexOf("\r\n"));
  return line.split(" ")[1] ?? "/";
}

/**
 * The agent's response bytes on their way to the visitor's node, the head
 * written anew with the tunnel's response header rules.
 */
function rewrittenResponse(method: string, policy: AccessPolicy): (chunk: Uint8Array, emit: (bytes: Uint8Array) => void) => void {
  let emit: (bytes: Uint8Array) => void = () => {};
  let response: ParsedHead | undefined;
  const parser = new ResponseParser(method, {
    head: (h) => (response = h),
    body: () => {},
    end: () => {},
    raw(bytes, part) {
      if (part !== "head" || !response) return emit(bytes);
      emit(responseHeadBytes(response, policy.rewriteResponse(response.headers)));
    },
  });
  let piping = false;
  return (chunk, out) => {
    emit = out;
    if (piping || parser.complete) return out(chunk); // after a 101, or anything past the end: the visitor's node judges it
    const error = parser.push(chunk);
    if (error) piping = true; // a malformed response goes on as it came: the visitor's node refuses it, as it would the agent's
    if (error) out(chunk);
  };
}

/**
 * Answers a relayed visitor here, with a refusal or the warning page, in
 * place of the tunnel's: the page's bytes as a local service's would come.
 */
async function answer(down: Stream, res: Response, head: boolean): Promise<void> {
  const bytes = await responseBytes(res, { head });
  if (down.isClosed) return;
  down.onData = (chunk) => down.consumed(chunk.byteLength); // the request's body is not wanted
  down.cork(() => {
    down.reply({});
    down.end(bytes);
  });
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
