/**
 * Tunnels added to and removed from a live session (wire.ts ADD, REMOVE),
 * for an agent whose HELLO said `live`: each ADD is judged alone by the
 * handshake's own steps, in the handshake's order, for the session's token
 * and user as they are now (core/admission.ts admitOnSession): OIDC
 * discovery, admission, the names claimed over every node (one user's
 * changes one at a time over the cluster, as handshakes are), what its kind
 * binds first, the admission asked again while admin changes concerning it
 * come, the operator's admission hook (--admission-hook) as a HELLO's
 * tunnels are asked, then the tunnel made by agent-tunnels.ts as a partial
 * HELLO's tunnel is, with its access rules and traffic policy. A refusal
 * refuses that tunnel only, with its code (and is said as tunnel.refused,
 * as a handshake's is; the tunnel made is tunnel.online, its end
 * tunnel.offline, from the registry's hooks). A REMOVE frees one tunnel at once, as a
 * GOAWAY frees a session's. The session's other tunnels, and their streams,
 * are never touched.
 *
 * ADD and REMOVE are handled one at a time, in the order sent, so that a
 * tunnel replaced (REMOVE, then ADD of the same name) finds its name free.
 */
import * as v from "valibot";
import { admitOnSession, type Admitted } from "../core/admission.ts";
import { AppError } from "../core/errors.ts";
import { rejudgeAdmitted } from "../core/live-admission.ts";
import { databaseUnavailable, UNAVAILABLE_MESSAGE } from "../db/unavailable.ts";
import { log } from "../log.ts";
import { parseJsonPayload, ProtocolError } from "../protocol/frames.ts";
import { AddTunnel, RemoveTunnel, type Hello } from "../protocol/messages.ts";
import { FrameType, MAX_PENDING_CHANGES, MAX_SESSION_TUNNELS, WireError, type FrameTypeValue } from "../protocol/wire.ts";
import { discoverProviders, needsDiscovery, type Providers } from "./access/handshake.ts";
import { askAdmissionHook } from "./admission-ask.ts";
import type { AgentSide } from "./agent-context.ts";
import type { AgentTunnels } from "./agent-tunnels.ts";
import { concerns } from "./live-rules.ts";
import { claimOverNodes, type Claimed } from "./node-claims.ts";
import type { Tunnel } from "./registry.ts";

/** Rounds of asking an ADD's admission again while admin changes concerning it keep coming (as a handshake's). */
const REJUDGE_ROUNDS = 3;

export class LiveChanges {
  /** The ADD and REMOVE frames taken and not yet answered. */
  private pending = 0;
  private queue: Promise<void> = Promise.resolve();
  /** The agent's names for the tunnels it added (ADD's `name`), by the edge's id: what the agents list shows. */
  readonly names = new Map<string, string>();

  constructor(
    private readonly side: AgentSide,
    private readonly tunnels: AgentTunnels,
  ) {}

  /** An ADD or REMOVE frame; `live`: the session's HELLO said it may send them. */
  received(type: FrameTypeValue, payload: Uint8Array, live: boolean): void {
    const what = type === FrameType.ADD ? "ADD" : "REMOVE";
    if (!this.side.isReady) throw new ProtocolError(`${what} before READY`);
    if (!live) throw new ProtocolError(`${what} from an agent whose HELLO did not say live`);
    if (this.pending >= MAX_PENDING_CHANGES) throw new ProtocolError(`more than ${MAX_PENDING_CHANGES} ADD and REMOVE frames waiting`);
    const raw = parseJsonPayload(payload, what);
    let run: () => Promise<void>;
    if (type === FrameType.ADD) {
      const parsed = v.safeParse(AddTunnel, raw);
      if (!parsed.success) throw new ProtocolError(`bad ADD: ${v.getDotPath(parsed.issues[0]) ?? "message"}: ${parsed.issues[0].message}`);
      run = () => this.add(parsed.output);
    } else {
      const parsed = v.safeParse(RemoveTunnel, raw);
      if (!parsed.success) throw new ProtocolError("bad REMOVE");
      run = () => this.remove(parsed.output);
    }
    this.pending++;
    this.queue = this.queue
      .then(run)
      .catch((err) => this.failed(err))
      .finally(() => this.pending--);
  }

  /** One tunnel more, judged alone; answered ADDED with the grant or its refusal. */
  private async add(msg: AddTunnel): Promise<void> {
    const { side } = this;
    const { edge, mux } = side;
    if (mux.closed) return;
    const answerRefusal = (err: AppError) => {
      if (mux.closed) return;
      mux.sendControl(FrameType.ADDED, { ref: msg.ref, refused: { code: err.code, message: err.message } });
      log.info("tunnel refused", { session: side.sessionId, code: err.code, reason: err.message, added: true });
      this.audit(err.code);
      edge.events?.refused(err, side.transport.address, { user: { id: side.userId, username: side.username }, token: { id: side.tokenId } });
    };
    if (edge.registry.sessionTunnels(side.sessionId).length >= MAX_SESSION_TUNNELS) {
      return answerRefusal(new AppError("TUNNEL_LIMIT", `one connection holds at most ${MAX_SESSION_TUNNELS} tunnels`));
    }
    // the tunnel alone, as a partial HELLO's tunnel: its refusal is its own
    const hello = { tunnels: [msg.tunnel], partial: true, proxy: side.proxy ?? false } satisfies Pick<Hello, "tunnels" | "partial" | "proxy">;
    // before admission reads the state: an admin change heard after it is judged before the tunnel opens
    let mark = edge.registry.changeMark();
    const cluster = edge.nodes;
    let claimed: Claimed = { names: [], members: new Map() };
    let admitted: Admitted | undefined;
    let created: Tunnel[] = [];
    try {
      // the token is known good (the session is live): its issuers may be asked
      const providers: Providers | undefined = needsDiscovery(hello.tunnels) ? await discoverProviders(hello.tunnels, edge.oidcHttpIssuers ?? false) : undefined;
      const rules = async () => {
        admitted = await admitOnSession(edge.core, side.tokenId, hello, edge.live);
        if (cluster) claimed = await claimOverNodes(cluster, edge, side.sessionId, hello, admitted);
      };
      // several nodes: the user's handshakes and changes are judged one at a time over the cluster
      if (cluster) await cluster.oneUserAtATime(side.userId, rules);
      else await rules();
      const prepared = mux.closed ? new Map() : await this.tunnels.prepare(admitted!);
      try {
        // the operator's own word (--admission-hook), after the rules and before the tunnel goes live, as for a HELLO's
        if (!mux.closed && edge.admissionHook) {
          const refused = await askAdmissionHook(edge, admitted!, side.transport.address);
          if (refused) throw refused;
        }
        for (let round = 0; round < REJUDGE_ROUNDS && !mux.closed && concerns(edge.registry.changesSince(mark), admitted!); round++) {
          mark = edge.registry.changeMark();
          admitted = await rejudgeAdmitted(edge.core, edge.live, admitted!, { token: "", ...hello });
        }
        if (mux.closed) return;
        // no wait between the last look at the changes heard and the tunnel going live
        const opened = this.tunnels.open({ hello, admitted: admitted!, providers, prepared, memberIds: claimed.members, created });
        const refused = opened.refused[0];
        if (refused) throw refused.error;
        if (!edge.registry.attachMore(side, opened.tunnels)) return;
        created = [];
        if (opened.tunnels.some((t) => t.privateName !== undefined)) edge.registry.judge?.forget();
        this.names.set(opened.tunnels[0]!.id, msg.name);
        if (cluster) {
          const rows = opened.tunnels.filter((t) => t.port !== undefined || t.pool || t.privateName !== undefined);
          await Promise.all(rows.map((t) => cluster.registerRow(t, side.sessionId).catch((err) => log.warn("cluster tunnel row not written", { err: String(err) }))));
        }
        // changes without end while it was judged: judged once live, as any live tunnel is
        if (concerns(edge.registry.changesSince(mark), admitted!)) void edge.registry.rulesChanged({ userId: side.userId });
        const [granted] = this.tunnels.granted(opened, false);
        if (mux.closed) return;
        mux.sendControl(FrameType.ADDED, { ref: msg.ref, tunnel: granted });
        edge.registry.announced(opened.tunnels);
        log.info("tunnel added", { session: side.sessionId, user: admitted!.user.username, tunnel: granted!.url });
      } finally {
        for (const bound of prepared.values()) if (!(bound instanceof AppError)) bound.closeUnadopted();
      }
    } catch (err) {
      // the database's outage refuses this tunnel, to be asked again later; the session goes on
      if (databaseUnavailable(err)) return answerRefusal(new AppError("DATABASE_UNAVAILABLE", UNAVAILABLE_MESSAGE));
      if (!(err instanceof AppError)) throw err;
      answerRefusal(err);
    } finally {
      for (const t of created) edge.registry.remove(t);
      if (cluster) {
        // a claim no tunnel took (a refusal after it, the agent gone) is given back
        for (const name of claimed.names) if (!edge.registry.tunnelBySubdomain(name)?.agent) void cluster.release(name);
        const kept = new Set(edge.registry.sessionTunnels(side.sessionId).map((t) => t.id));
        for (const id of claimed.members.values()) if (!kept.has(id)) void cluster.dropMember(id).catch((e) => log.warn("cluster pool member not given back", { err: String(e) }));
      }
    }
  }

  /** One tunnel of the session given up: gone now, its name or port free once REMOVED is sent. */
  private async remove(msg: { ref: number; tunnel: string }): Promise<void> {
    const { side } = this;
    const { edge, mux } = side;
    if (mux.closed) return;
    const t = edge.registry.sessionTunnels(side.sessionId).find((x) => x.id === msg.tunnel);
    if (t) {
      this.tunnels.endStreams(t.id, WireError.GOING_AWAY);
      edge.registry.release(t);
      this.names.delete(t.id);
      // other nodes no longer see it before the agent hears it is gone (an ADD of its name may come next)
      await t.gone?.catch(() => {});
      log.info("tunnel removed", { session: side.sessionId, tunnel: t.subdomain ?? t.hostname ?? t.privateName ?? t.port });
    }
    if (!mux.closed) mux.sendControl(FrameType.REMOVED, { ref: msg.ref, tunnel: msg.tunnel });
  }

  /** A refused ADD into the audit log, counted as refused handshakes are. */
  private audit(code: string): void {
    const { side } = this;
    side.edge.core.audit.repeated({
      action: "agent.refused",
      address: side.transport.address,
      outcome: "refused",
      code,
      identify: async () => {
        const user = await side.edge.core.users.get(side.userId).catch(() => undefined);
        return { userId: side.userId, ...(user ? { username: user.username } : {}), tokenId: side.tokenId };
      },
    });
  }

  /** An ADD or REMOVE that threw: a bug, and the session goes (the agent connects again and asks for its tunnels). */
  private failed(err: unknown): void {
    const { mux } = this.side;
    log.error("tunnel change failed", { session: this.side.sessionId, err: String(err) });
    if (!mux.closed) mux.fail("INTERNAL", "the server failed to handle a tunnel change");
  }
}
