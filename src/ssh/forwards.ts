/**
 * An SSH connection's `-R` forwards: each `tcpip-forward` read as a tunnel
 * (forward-request.ts), admitted and served as an agent's session of its
 * own in memory (memory-agent.ts), answered as OpenSSH expects (success,
 * with the port for a `-R 0:...`, which it prints as "Allocated port N";
 * failure, which it prints as "remote port forwarding failed"), and said
 * on the session: its address once live, burrow's reason when refused.
 *
 * What ends a forward's session decides what becomes of the connection: a
 * refusal of the device or its user (a key removed, a user disabled, the
 * devices over max_devices) ends the whole connection with that reason;
 * one of the tunnel alone (its kind no longer allowed, over max_tunnels)
 * ends the forward, and the connection when nothing is left on it.
 */
import type { Connection } from "ssh2";
import type { EdgeContext } from "../edge/agent-context.ts";
import { log } from "../log.ts";
import type { GrantedTunnel } from "../protocol/messages.ts";
import { channelDialer } from "./channel-socket.ts";
import type { ForwardOptions } from "./forward-options.ts";
import { forwardLabel, forwardRequest } from "./forward-request.ts";
import { MemoryAgent, type AgentSessionList, type ForwardPeer } from "./memory-agent.ts";
import type { SessionView } from "./session-view.ts";

/** Forwards one connection may hold: as many tunnels as one agent's HELLO. */
export const MAX_FORWARDS = 16;

/** Refusals of the device or its user, rather than of one tunnel: the connection ends with them. */
const WHOLE_CONNECTION: ReadonlySet<string> = new Set(["KEY_REVOKED", "TOKEN_DISABLED", "USER_DISABLED", "DEVICE_LIMIT", "PROXY_DENIED", "SERVER_SHUTDOWN", "RATE_LIMITED"]);

const ORIGINATOR = { address: "127.0.0.1", port: 0 };

type Reply = { accept?: (port?: number) => void; reject?: () => void };

interface Forward {
  bindAddr: string;
  bindPort: number;
  /** The port OpenSSH was told (a `-R 0:...`'s allocated one), what its channels and its cancel name. */
  port: number;
  label: string;
  agent: MemoryAgent;
  granted?: GrantedTunnel;
}

/** What the forwards need of their connection. */
export interface ForwardsHost {
  client: Connection;
  edge: EdgeContext;
  sessions: AgentSessionList;
  peer: ForwardPeer;
  view: SessionView;
  /** A refusal of the device or its user: the connection ends with it. */
  endConnection(code: string, message: string): void;
  /** A forward ended: the connection ends when it holds nothing more. */
  settle(): void;
}

export class Forwards {
  private readonly all = new Set<Forward>();
  private n = 0;

  constructor(private readonly host: ForwardsHost) {}

  /** Forwards live or on their way. */
  get size(): number {
    return this.all.size;
  }

  /** A `tcpip-forward` from the client, with the session's options. */
  ask(bindAddr: string, bindPort: number, reply: Reply, options: ForwardOptions): void {
    const { host } = this;
    const label = forwardLabel(bindAddr, bindPort);
    const refuse = (code: string | undefined, message: string) => {
      reply.reject?.();
      host.view.say(`burrow: -R ${label} refused: ${code ? `${code}: ` : ""}${message}`, true);
      host.settle();
    };
    if (this.all.size >= MAX_FORWARDS) return refuse("TUNNEL_LIMIT", `one SSH connection holds ${MAX_FORWARDS} forwards at most`);
    const asked = forwardRequest(bindAddr, bindPort, options);
    // the CLI's words for an option, or why the -R names no tunnel: no code, as the CLI prints none
    if ("refused" in asked) return refuse(undefined, asked.refused);
    const id = ++this.n;
    if (this.n === 2) host.view.several();
    const forward: Forward = { bindAddr, bindPort, port: bindPort, label, agent: undefined! };
    // the originator a channel names: the gateway itself (a kept-alive connection carries many visitors)
    const dial = channelDialer(host.client, `ssh:${host.peer.remote}:${id}`, forward, ORIGINATOR);
    const target = { host: bindAddr || "localhost", port: bindPort, dial, ...(asked.hostHeader !== undefined ? { hostHeader: asked.hostHeader } : {}), ...(asked.proxyProtocol ? { proxyProtocol: true } : {}), ...(asked.upstreamProtocol ? { upstreamProtocol: asked.upstreamProtocol } : {}) };
    forward.agent = new MemoryAgent(host.edge, host.sessions, host.peer, { name: label, local: `-R ${label}`, target }, host.view, {
      granted: (t) => {
        forward.granted = t;
        // a -R 0:... is told its port (OpenSSH: "Allocated port N"), and its channels name that port
        if (bindPort === 0 && t.port !== undefined) forward.port = t.port;
        reply.accept?.(bindPort === 0 ? t.port : undefined);
        host.view.say(`Forwarding  ${t.url} -> your ssh -R ${label}`);
        if (t.private) {
          const shared = t.private.shares.length > 0 ? `shared with ${t.private.shares.join(", ")}` : "shared with no one: only you";
          host.view.say(`Private     not public; reach it with  burrow connect ${t.private.target}  or  ssh -L PORT:${t.private.target}:${bindPort}   (${shared})`);
        }
      },
      ended: (code, message) => this.ended(forward, reply, code, message),
      revoked: (code, message) => {
        host.view.say(`burrow: -R ${label} closed by the server: ${code}: ${message}`, true);
        forward.agent.leave();
        this.all.delete(forward);
        host.settle();
      },
    });
    this.all.add(forward);
    forward.agent.hello(asked.request);
  }

  /** A `cancel-tcpip-forward`: the forward goes, its names free at once. */
  cancel(bindAddr: string, bindPort: number): boolean {
    for (const f of this.all) {
      if (f.bindAddr !== bindAddr || (f.port !== bindPort && f.bindPort !== bindPort)) continue;
      this.all.delete(f);
      f.agent.leave();
      return true;
    }
    return false;
  }

  /** The connection ended: every forward's session goes, its names held for the key for the grace period. */
  dropAll(): void {
    for (const f of this.all) f.agent.drop();
    this.all.clear();
  }

  private ended(forward: Forward, reply: Reply, code: string, message: string): void {
    const { host } = this;
    if (!this.all.delete(forward)) return;
    if (!forward.granted) {
      reply.reject?.();
      host.view.say(`burrow: -R ${forward.label} refused: ${code}: ${message}`, true);
    } else {
      log.info("ssh forward closed", { remote: host.peer.remote, forward: forward.label, code });
      host.view.say(`burrow: -R ${forward.label} closed by the server: ${code}: ${message}`, true);
    }
    if (WHOLE_CONNECTION.has(code)) return host.endConnection(code, message);
    host.settle();
  }
}
