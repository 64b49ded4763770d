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
import { readOpenMeta, type RelayedMeta } from "../protocol/messages.ts";
import type { Stream } from "../protocol/mux.ts";
import { joinStreams } from "../protocol/stream-join.ts";
import { WireError } from "../protocol/wire.ts";
import type { AgentSide } from "./agent-context.ts";
import { staysWhileOpen } from "./judgement/live-visits.ts";
import { judge, Refusal, type Door } from "./judgement/pipeline.ts";
import { connectorStanding, openPrivateStream, privateKindFits, StandingRefusal, type PrivateVisit } from "./private-streams.ts";
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
   * A stream the agent opened: a connector's local connection, through the
   * judgement's steps (judgement/pipeline.ts) by the connector's door:
   * joined to a stream to the private tunnel's agent, on this node or
   * through a relay link to the node it is on, where its rules are asked
   * again.
   */
  peerStream(stream: Stream): void {
    const c = this.connector;
    const meta = readOpenMeta(stream.meta);
    if (!c || !meta) return stream.reset(WireError.PROTOCOL_ERROR);
    const { side } = this;
    const v: ConnectorVisit = {
      client: side.transport.address,
      connector: { userId: side.userId, tokenId: side.tokenId, username: c.username },
      kind: meta.kind,
      remote: side.transport.remote,
      local: meta.remote,
      stream,
      session: c,
    };
    this.judged(v);
  }

  private judged(v: ConnectorVisit): void {
    const judged = judge(this.door, v);
    if (!judged) return;
    judged.catch((err) => {
      log.warn("connector's stream not judged", { session: this.side.sessionId, to: v.session.target, err: String(err) });
      v.stream.reset(databaseUnavailable(err) ? "DATABASE_UNAVAILABLE" : WireError.UPSTREAM_FAILED);
    });
  }

  /** The door of this session's streams, when it is a connector's. */
  private readonly door: Door<ConnectorVisit> = {
    name: "private",
    find: (v) => this.privateTunnel(v),
    standing: (t, v) => connectorStanding(this.side.edge.registry.judge, t, v, v.session.ownerId, v.session.name),
    reaches: privateKindFits,
    forward: (v, t) => {
      if (v.stream.isClosed) return;
      if (!t.relayed) {
        this.joinPrivate(v.stream, t, openPrivateStream(t, v));
        return staysWhileOpen(t, v.client, v.stream);
      }
      // the owner's node asks the rules again; OPEN says who connects
      const relayed: RelayedMeta = { tunnel: "", kind: v.kind as "tcp" | "udp", remote: v.remote, local: v.local, client: v.client, connector: { id: v.connector.userId, username: v.connector.username, token: v.connector.tokenId } };
      const up = t.agent?.openStream(relayed);
      if (up || v.again) return this.joinPrivate(v.stream, t, up ?? "TUNNEL_OFFLINE");
      // its relay link is gone since: judged once more, with where the database says the tunnel is now
      v.session.elsewhere = undefined;
      v.again = true;
      this.judged(v);
    },
    refuse: (v, r) => {
      v.stream.reset(r.code.slice(0, 100));
      // the connector's own standing refused: its session goes too, with the same code
      if (r instanceof StandingRefusal) this.side.refuse(r.code, r.message ?? r.code);
    },
  };

  /**
   * Step 1: the private tunnel, on this node, or the stand-in of the one on
   * another (known from before, or asked of the database).
   */
  private privateTunnel(v: ConnectorVisit): Tunnel | Refusal | Promise<Tunnel | Refusal> {
    const c = v.session;
    const { registry, nodes } = this.side.edge;
    const here = registry.privateTunnel(c.ownerId, c.name);
    if (here?.agent || !nodes) return here ?? TUNNEL_OFFLINE;
    if (c.elsewhere?.agent) return c.elsewhere;
    // not known, or its relay link is gone: the database says where the tunnel is now
    c.elsewhere = undefined;
    return nodes.privateElsewhere(c.ownerId, c.name).then(
      (there) => {
        if (there) c.elsewhere = there;
        return there ?? TUNNEL_OFFLINE;
      },
      () => UPSTREAM_FAILED,
    );
  }

  /** A connector's stream joined to `up`, its traffic counted to the owner's tunnel `t`; or reset with why not. */
  private joinPrivate(stream: Stream, t: Tunnel, up: Stream | string): void {
    if (typeof up === "string") return stream.reset(up);
    joinStreams(stream, up, { countUp: (n) => t.countIn(n), countDown: (n) => t.countOut(n) });
  }
}

/** A connector's stream on its way through the steps, with its session. */
interface ConnectorVisit extends PrivateVisit {
  readonly stream: Stream;
  readonly session: ConnectorSession;
  /** Judged a second time, its relay link having gone. */
  again?: boolean;
}

const TUNNEL_OFFLINE = new Refusal("name", "TUNNEL_OFFLINE");
const UPSTREAM_FAILED = new Refusal("name", WireError.UPSTREAM_FAILED);
