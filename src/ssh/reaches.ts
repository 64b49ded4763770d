/**
 * `ssh -L 15432:alice/db:5432`: a `direct-tcpip` channel to a private
 * tunnel shared with the key's user, as `burrow connect alice/db` reaches
 * it. Each channel is a visit through the edge's one judgement
 * (edge/judgement/pipeline.ts) by the "ssh" door, with the private doors'
 * steps: the connector's standing and share asked again (its key, its
 * user, the share, the protocol: edge/live-rules.ts), the kinds that fit,
 * the tunnel's IP rules; then the channel is joined to a stream to the
 * owner's agent (on this node, or relayed to the node it is on), and stays
 * judged while it is open (judgement/live-visits.ts).
 *
 * The first channel to a target admits the connection as a connector of
 * it (core/admission.ts admitConnector, the key as its device): a session
 * in the registry that holds no tunnel and reaches `owner/name`, which the
 * registry's paths close (a key removed, a user disabled, an unshare, an
 * admin's narrowing), ending its channels. A refused channel is an open
 * failure whose words OpenSSH prints ("open failed: ... burrow: NOT_SHARED: ...").
 */
import type { Connection, ServerChannel, TcpipRequestInfo } from "ssh2";
import { admitConnector } from "../core/admission.ts";
import { AppError } from "../core/errors.ts";
import type { EdgeContext } from "../edge/agent-context.ts";
import { judge, Refusal, type Door } from "../edge/judgement/pipeline.ts";
import { stays } from "../edge/judgement/live-visits.ts";
import { connectorStanding, openPrivateStream, privateKindFits, StandingRefusal, type PrivateVisit } from "../edge/private-streams.ts";
import type { AgentLink, PrivateConnection, Tunnel } from "../edge/registry.ts";
import { databaseUnavailable } from "../db/unavailable.ts";
import { log } from "../log.ts";
import type { RelayedMeta } from "../protocol/messages.ts";
import type { Stream } from "../protocol/mux.ts";
import { WireError } from "../protocol/wire.ts";
import { SocketRelay } from "../sockets/socket-stream.ts";
import { channelSocket } from "./channel-socket.ts";
import type { SessionView } from "./session-view.ts";
import { OPEN_FAILURE, refuseOpen } from "./ssh2-extras.ts";

/** `-L` channels one connection may hold open at once. */
export const MAX_REACH_CHANNELS = 256;
/** Private tunnels one connection may reach at once (each a connector's session). */
const MAX_TARGETS = 16;

/** Refusals of the device or its user: the connection ends with them. */
const WHOLE_CONNECTION: ReadonlySet<string> = new Set(["KEY_REVOKED", "USER_DISABLED", "TOKEN_DISABLED"]);

export interface ReachesHost {
  client: Connection;
  edge: EdgeContext;
  /** The client: "ip:port", and its canonical address (the IP rules', the audit's). */
  remote: string;
  address: string;
  key: { id: number; device: number };
  user: { id: number; username: string };
  view: SessionView;
  endConnection(code: string, message: string): void;
}

/** The connection as a connector of one private tunnel: its registry session, and its open channels. */
class Presence implements AgentLink {
  readonly sessionId = crypto.randomUUID();
  readonly channels = new Set<ServerChannel>();
  readonly connects: { ownerId: number; name: string };
  private left?: () => void;
  closed = false;

  constructor(
    private readonly host: ReachesHost,
    readonly label: string,
    ownerId: number,
    name: string,
    private readonly gone: (p: Presence) => void,
  ) {
    this.connects = { ownerId, name };
  }

  get userId(): number {
    return this.host.user.id;
  }

  get tokenId(): number {
    return this.host.key.device;
  }

  /** In the registry, and on the tunnel's list of connectors (here, or through the registry when it is on another node). */
  enter(here: Tunnel | undefined): void {
    const { registry } = this.host.edge;
    registry.attach(this, []);
    const entry: PrivateConnection = { userId: this.userId, tokenId: this.tokenId, close: (code) => this.refuse(code, code === "NOT_SHARED" ? `${this.label} is no longer shared with you` : `${this.label} is not there now`) };
    if (here?.agent) {
      here.connectors.add(entry);
      this.left = () => here.connectors.delete(entry);
    } else this.left = registry.connectedElsewhere(this.connects.ownerId, this.connects.name, entry);
  }

  openStream(): Stream | undefined {
    return undefined; // nothing is opened toward a connector
  }

  /** The registry's paths: an admin's change, a revocation, an unshare, the tunnel gone. Its channels end. */
  refuse(code: string, message: string): void {
    if (this.closed) return;
    this.close();
    this.host.view.say(`burrow: -L ${this.label} closed by the server: ${code}: ${message}`, true);
    if (WHOLE_CONNECTION.has(code)) this.host.endConnection(code, message);
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.left?.();
    this.host.edge.registry.detach(this.sessionId, false);
    for (const c of this.channels) c.destroy();
    this.channels.clear();
    this.gone(this);
  }
}

/** A channel on its way through the steps. */
interface ChannelVisit extends PrivateVisit {
  readonly presence: Presence;
  readonly accept: () => ServerChannel;
  readonly reject: () => void;
  /** Judged a second time, its relay link having gone. */
  again?: boolean;
}

export class Reaches {
  private readonly presences = new Map<string, Presence | Promise<Presence | AppError>>();
  private open = 0;

  constructor(private readonly host: ReachesHost) {}

  /** A `direct-tcpip` channel asked for: `destIP` names the private tunnel ("owner/name"). */
  channel(accept: () => ServerChannel, reject: () => void, info: TcpipRequestInfo): void {
    const { host } = this;
    const refuse = (code: string, message: string, reason: number = OPEN_FAILURE.ADMINISTRATIVELY_PROHIBITED) => refuseOpen(host.client, reject, reason, `burrow: ${code}: ${message}`);
    if (this.open >= MAX_REACH_CHANNELS) return refuse("TOO_MANY_CHANNELS", `one SSH connection holds ${MAX_REACH_CHANNELS} -L connections at once`, OPEN_FAILURE.CONNECT_FAILED);
    const target = info.destIP.trim().toLowerCase();
    this.presence(target).then(
      (presence) => {
        if (presence instanceof AppError) return refuse(presence.code, presence.message);
        const visit: ChannelVisit = {
          client: host.address,
          connector: { userId: host.user.id, tokenId: host.key.device, username: host.user.username },
          kind: "tcp",
          remote: host.remote,
          local: `${info.srcIP.includes(":") ? `[${info.srcIP}]` : info.srcIP}:${info.srcPort}`.slice(0, 64),
          presence,
          accept,
          reject,
        };
        this.judged(visit);
      },
      (err) => refuse(databaseUnavailable(err) ? "DATABASE_UNAVAILABLE" : "INTERNAL", databaseUnavailable(err) ? "the database does not answer; try again shortly" : "the server failed to handle it", OPEN_FAILURE.CONNECT_FAILED),
    );
  }

  /** The connection ended: each connector's session goes. */
  closeAll(): void {
    for (const p of this.presences.values()) if (p instanceof Presence) p.close();
    this.presences.clear();
  }

  /** The connection's connector session for `target`, admitted at its first channel; or the refusal. */
  private presence(target: string): Promise<Presence | AppError> {
    const known = this.presences.get(target);
    if (known instanceof Presence && !known.closed) return Promise.resolve(known);
    if (known instanceof Promise) return known;
    if (this.presences.size >= MAX_TARGETS) return Promise.resolve(new AppError("NOT_SHARED", `one SSH connection reaches ${MAX_TARGETS} private tunnels at most`));
    const admitted = this.admit(target).finally(() => {
      if (this.presences.get(target) === admitted) this.presences.delete(target);
    });
    this.presences.set(target, admitted);
    return admitted.then((p) => {
      if (p instanceof Presence) this.presences.set(target, p);
      return p;
    });
  }

  private async admit(target: string): Promise<Presence | AppError> {
    const { host } = this;
    const { edge } = host;
    try {
      const admitted = await admitConnector(edge.core, { token: "", proxy: false, target }, { sshKey: host.key.id });
      const { owner, declared } = admitted;
      const label = `${owner.username}/${declared.name}`;
      const here = edge.registry.privateTunnel(owner.id, declared.name);
      const elsewhere = here?.agent ? undefined : await edge.nodes?.privateElsewhere(owner.id, declared.name).catch(() => undefined);
      if (!here?.agent && !elsewhere) return new AppError("TUNNEL_OFFLINE", `${label} is shared with you, but its owner's agent is not connected now`);
      const presence = new Presence(host, label, owner.id, declared.name, (p) => {
        if (this.presences.get(target) === p) this.presences.delete(target);
      });
      presence.enter(here);
      void edge.core.audit.record({ action: "private.connect", address: host.address, outcome: "ok", userId: host.user.id, username: host.user.username, target: `private:${label}`, details: { ssh_key_id: host.key.id } });
      log.info("ssh connector connected", { user: host.user.username, to: label, remote: host.remote });
      return presence;
    } catch (err) {
      if (err instanceof AppError) {
        if (WHOLE_CONNECTION.has(err.code)) host.endConnection(err.code, err.message);
        return err;
      }
      throw err;
    }
  }

  private judged(v: ChannelVisit): void {
    const judged = judge(this.door, v);
    if (!judged) return;
    judged.catch((err) => {
      log.warn("ssh -L channel not judged", { to: v.presence.label, err: String(err) });
      refuseOpen(this.host.client, v.reject, OPEN_FAILURE.CONNECT_FAILED, databaseUnavailable(err) ? "burrow: DATABASE_UNAVAILABLE" : "burrow: UPSTREAM_FAILED");
    });
  }

  /** The door of `-L` channels: the private doors' steps, each channel judged. */
  private readonly door: Door<ChannelVisit> = {
    name: "ssh",
    find: (v) => this.tunnelOf(v),
    standing: (t, v) => connectorStanding(this.host.edge.registry.judge, t, v, v.presence.connects.ownerId, v.presence.connects.name),
    reaches: privateKindFits,
    forward: (v, t) => {
      if (v.presence.closed) return refuseOpen(this.host.client, v.reject, OPEN_FAILURE.CONNECT_FAILED, "burrow: the session to the tunnel ended");
      let up: Stream | string;
      if (!t.relayed) up = openPrivateStream(t, v);
      else {
        // the owner's node asks the rules again; OPEN says who connects
        const relayed: RelayedMeta = { tunnel: "", kind: "tcp", remote: v.remote, local: v.local, client: v.client, connector: { id: v.connector.userId, username: v.connector.username, token: v.connector.tokenId } };
        const opened = t.agent?.openStream(relayed);
        if (!opened && !v.again) {
          // its relay link is gone since: judged once more, with where the database says the tunnel is now
          return this.judged({ ...v, again: true });
        }
        up = opened ?? "TUNNEL_OFFLINE";
      }
      if (typeof up === "string") return refuseOpen(this.host.client, v.reject, OPEN_FAILURE.CONNECT_FAILED, `burrow: ${up}`);
      this.join(v, t, up);
    },
    refuse: (v, r) => {
      refuseOpen(this.host.client, v.reject, OPEN_FAILURE.ADMINISTRATIVELY_PROHIBITED, `burrow: ${r.code}${r.message ? `: ${r.message}` : ""}`);
      // the connector's own standing refused: its session goes too, with the same code
      if (r instanceof StandingRefusal) v.presence.refuse(r.code, r.message ?? r.code);
    },
  };

  /** Step 1: the private tunnel, on this node, or the stand-in of the one on another. */
  private tunnelOf(v: ChannelVisit): Tunnel | Refusal | Promise<Tunnel | Refusal> {
    const { ownerId, name } = v.presence.connects;
    const { registry, nodes } = this.host.edge;
    const here = registry.privateTunnel(ownerId, name);
    if (here?.agent || !nodes) return here?.agent ? here : TUNNEL_OFFLINE;
    return nodes.privateElsewhere(ownerId, name).then(
      (there) => there ?? TUNNEL_OFFLINE,
      () => UPSTREAM_FAILED,
    );
  }

  /** Step 4: the channel accepted and joined to `up`, its traffic counted to the owner's tunnel; it stays judged while open. */
  private join(v: ChannelVisit, t: Tunnel, up: Stream): void {
    const channel = v.accept();
    v.presence.channels.add(channel);
    this.open++;
    let over = false;
    const relay: { r?: SocketRelay } = {};
    const socket = channelSocket(channel, undefined, v.remote, {
      data: (_s, bytes) => relay.r?.socketData(bytes),
      drain: () => relay.r?.socketDrain(),
      end: () => relay.r?.socketEnd(),
      close: (_s, error) => {
        if (over) return;
        over = true;
        this.open--;
        v.presence.channels.delete(channel);
        relay.r?.socketClosed(error);
      },
    });
    relay.r = new SocketRelay(socket, up, { fromSocket: (n) => t.countIn(n), toSocket: (n) => t.countOut(n) });
    if (!t.relayed) {
      stays(t, {
        client: v.client,
        get over() {
          return over;
        },
        end: () => channel.destroy(),
      });
    }
  }
}

const TUNNEL_OFFLINE = new Refusal("name", "TUNNEL_OFFLINE", "the private tunnel's owner is not connected now");
const UPSTREAM_FAILED = new Refusal("name", WireError.UPSTREAM_FAILED);
