/**
 * The streams an agent's connection carries besides its visitors' (which
 * the registry opens through AgentConnection.openStream, open-stream.ts): a
 * connector's (`burrow connect owner/name`), each joined to a stream to the
 * private tunnel's agent on this node or through a relay link to the node
 * it is on, its rules asked again for each. Also the connector's session:
 * the private tunnel it reaches, checked again when that tunnel changes on
 * another node.
 */
import type { admitConnector } from "../core/admission.ts";
import { AppError } from "../core/errors.ts";
import { databaseUnavailable } from "../db/unavailable.ts";
import { log } from "../log.ts";
import { readOpenMeta, type OpenMeta, type RelayedMeta } from "../protocol/messages.ts";
import type { Stream } from "../protocol/mux.ts";
import { joinStreams } from "../protocol/stream-join.ts";
import { WireError } from "../protocol/wire.ts";
import type { AgentSide } from "./agent-context.ts";
import { openToPrivate } from "./private-streams.ts";
import type { PrivateConnection, Tunnel } from "./registry.ts";

/** What admission granted a connector (core/admission.ts admitConnector). */
type ConnectorGrant = Awaited<ReturnType<typeof admitConnector>>;

/**
 * A connector's session: the private tunnel it reaches, and, when that is
 * on another node, the stand-in found there, kept for the session's next
 * connections (looked up again when it no longer opens streams, or when
 * that node says the tunnel changed).
 */
interface ConnectorSession {
  ownerId: number;
  name: string;
  target: string;
  username: string;
  elsewhere?: Tunnel;
}

export class AgentStreams {
  /** A connector's session (`burrow connect owner/name`): the private tunnel its streams go to. */
  private connector?: ConnectorSession;
  /** Takes a connector's session off its private tunnel's list, when it ends. */
  private connectorLeft?: () => void;

  constructor(private readonly side: AgentSide) {}

  /** A connector's session: the private tunnel it reaches. */
  get connects(): { ownerId: number; name: string } | undefined {
    return this.connector && { ownerId: this.connector.ownerId, name: this.connector.name };
  }

  /**
   * A connector's handshake succeeded: its session reaches `label`, whose
   * agent is `here` on this node or `elsewhere` on another. The private
   * tunnel (or, on another node, the registry) knows it from now on, to
   * close it when the owner unshares, leaves or is revoked.
   */
  connected(admitted: ConnectorGrant, label: string, here: Tunnel | undefined, elsewhere: Tunnel | undefined): void {
    const { user, token, owner, declared } = admitted;
    const { registry } = this.side.edge;
    this.connector = { ownerId: owner.id, name: declared.name, target: label, username: user.username, ...(elsewhere ? { elsewhere } : {}) };
    const entry: PrivateConnection = {
      userId: user.id,
      tokenId: token.id,
      close: (code: string) => this.side.refuse(code, code === "NOT_SHARED" ? `${label} is no longer shared with you` : `${label} is not there now`),
      recheck: () => void this.recheckConnector(user, label),
    };
    if (here?.agent) {
      here.connectors.add(entry);
      this.connectorLeft = () => here.connectors.delete(entry);
    } else this.connectorLeft = registry.connectedElsewhere(owner.id, declared.name, entry);
  }

  /** The connection ended: a connector's session leaves its private tunnel's list. */
  closed(): void {
    this.connectorLeft?.();
  }

  /**
   * The private tunnel this connector reaches is on another node and
   * changed there (it came, went, or was shared anew): still shared with
   * it (else NOT_SHARED), and live somewhere (else TUNNEL_OFFLINE, which
   * the connector waits out as on one node).
   */
  private async recheckConnector(user: { id: number; username: string }, label: string): Promise<void> {
    const c = this.connector;
    const { edge, mux } = this.side;
    if (!c || mux.closed) return;
    try {
      const connector = await edge.core.users.get(user.id);
      await edge.core.privateShares.reach(connector, label);
    } catch (err) {
      if (err instanceof AppError) return this.side.refuse(err.code === "NOT_FOUND" ? "NOT_SHARED" : err.code, `${label} is no longer shared with you`);
      return log.warn("private tunnel not checked again", { to: label, err: String(err) });
    }
    if (edge.registry.privateTunnel(c.ownerId, c.name)?.agent) return;
    const elsewhere = await edge.nodes?.privateElsewhere(c.ownerId, c.name).catch(() => undefined);
    c.elsewhere = elsewhere;
    if (!elsewhere) this.side.refuse("TUNNEL_OFFLINE", `${label} is not there now`);
  }

  /**
   * A stream the agent opened: a connector's local connection, joined to a
   * stream to the private tunnel's agent, on this node or through a relay
   * link to the node it is on. Whether it may is asked again for each
   * (edge/private-streams.ts), there.
   */
  peerStream(stream: Stream): void {
    const c = this.connector;
    const meta = readOpenMeta(stream.meta);
    if (!c || !meta) return stream.reset(WireError.PROTOCOL_ERROR);
    const { side } = this;
    // each connection asks the rules as they are now, not as they were at the handshake
    const standing = side.edge.registry.judge?.connector({ userId: side.userId, tokenId: side.tokenId }, c.ownerId, c.name);
    if (!(standing instanceof Promise)) return this.connectorStream(stream, meta, c, standing);
    standing.then(
      (refusal) => {
        if (!stream.isClosed) this.connectorStream(stream, meta, c, refusal);
      },
      (err) => {
        log.warn("connector's stream not judged", { session: side.sessionId, to: c.target, err: String(err) });
        stream.reset(databaseUnavailable(err) ? "DATABASE_UNAVAILABLE" : WireError.UPSTREAM_FAILED);
      },
    );
  }

  /** A connector's stream its rules allow (or refuse: the session goes too, with the same code). */
  private connectorStream(stream: Stream, meta: OpenMeta, c: ConnectorSession, refusal: AppError | undefined): void {
    const { side } = this;
    if (refusal) {
      stream.reset(refusal.code);
      return side.refuse(refusal.code, refusal.message);
    }
    const { registry, nodes } = side.edge;
    const here = registry.privateTunnel(c.ownerId, c.name);
    const who = { userId: side.userId, username: c.username };
    if (here?.agent || !nodes) return this.joinPrivate(stream, here, openToPrivate(here, who, meta.kind, side.transport.remote, meta.remote));
    // the owner's node asks the rules again; OPEN says who connects
    const relayed: RelayedMeta = { tunnel: "", kind: meta.kind, remote: side.transport.remote, local: meta.remote, connector: { id: side.userId, username: c.username, token: side.tokenId } };
    const known = c.elsewhere;
    const up = known?.agent?.openStream(relayed);
    if (known && up) return this.joinPrivate(stream, known, up);
    // not known, or its relay link is gone: the database says where the tunnel is now
    c.elsewhere = undefined;
    void nodes.privateElsewhere(c.ownerId, c.name).then(
      (there) => {
        if (there) c.elsewhere = there;
        if (stream.isClosed) return;
        this.joinPrivate(stream, there, there?.agent?.openStream(relayed) ?? "TUNNEL_OFFLINE");
      },
      () => stream.reset(WireError.UPSTREAM_FAILED),
    );
  }

  /** A connector's stream joined to `up`, its traffic counted to the owner's tunnel `t`; or reset with why not. */
  private joinPrivate(stream: Stream, t: Tunnel | undefined, up: Stream | string): void {
    if (typeof up === "string" || !t) return stream.reset(typeof up === "string" ? up : "TUNNEL_OFFLINE");
    joinStreams(stream, up, { countUp: (n) => t.countIn(n), countDown: (n) => t.countOut(n) });
  }
}
