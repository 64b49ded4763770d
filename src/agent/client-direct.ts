/**
 * The agent's way to the edge's direct port (one socket, no WebSocket
 * framing): asked for before a first connect (direct-port.ts), followed on
 * MOVE, tried first on a reconnect, and given up for the rest of the run
 * when it does not work out (a firewall in the way, most often), since the
 * WebSocket goes wherever HTTP goes. It owns what the run learnt of the
 * port; the sessions on it are the client's (client.ts runSession).
 */
import { directLink, type Link } from "../sockets/links.ts";
import type { ClientSide, SessionResult } from "./client-context.ts";
import { askDirectPort } from "./direct-port.ts";

/** How long the agent tries the edge's direct port before it stays on the WebSocket. */
const DIRECT_CONNECT_TIMEOUT_MS = 3_000;
/** How long the agent waits for READY (or a refusal) on the direct port before it stays on the WebSocket. */
const DIRECT_ANSWER_TIMEOUT_MS = 5_000;

export class DirectRoute {
  /** The direct port could not be reached once: this run of the agent stays on the WebSocket. */
  private unreachable = false;
  /** The direct port that admitted the last session: reconnects try it first. */
  private knownPort?: number;
  /** The edge was asked where its direct port is (once a run: an older edge has no answer). */
  private asked = false;

  constructor(private readonly client: ClientSide) {}

  /** Whether this connect may go direct: through a proxy the agent goes only where the proxy takes it. */
  get possible(): boolean {
    return !this.client.opts.proxy && !this.unreachable;
  }

  /**
   * A session on the direct port before any WebSocket, when the run knows
   * it or the edge names it; undefined: the WebSocket now. Call only when
   * `possible`.
   */
  async first(server: URL, secure: boolean): Promise<SessionResult | undefined> {
    if (this.knownPort !== undefined) {
      // a reconnect: straight to the direct port that admitted the last session, one connection
      // instead of a WebSocket and a MOVE first; if that fails, the WebSocket asks afresh
      const again = await this.reconnect(server, secure, this.knownPort);
      if (again) return again;
    }
    if (!this.asked) {
      // a first connect: ask where the direct port is, and go there instead of a WebSocket and a MOVE
      this.asked = true;
      const port = await askDirectPort(server, this.client.opts.insecure);
      if (this.client.stopping) return { outcome: { kind: "stopped" }, wasReady: false };
      if (port !== undefined) return this.go(server, secure, port);
    }
    return undefined;
  }

  /** A session on the direct port the edge named (MOVE, or its answer to askDirectPort); the WebSocket when that does not work out. */
  async go(server: URL, secure: boolean, port: number): Promise<SessionResult> {
    const link = await this.open(server, secure, port);
    if (this.client.stopping) return { outcome: { kind: "stopped" }, wasReady: false };
    // a firewall in the way, most often: the WebSocket, which goes wherever HTTP goes, carries the session
    if (typeof link === "string") return this.stayOnWebSocket(port, link);
    const direct = await this.client.runSession(link, true, DIRECT_ANSWER_TIMEOUT_MS);
    const o = direct.outcome;
    if (direct.wasReady) this.knownPort = port;
    if (direct.wasReady || this.client.stopping) return direct;
    // the port took the connection, but no edge answered HELLO there (another service, a middlebox
    // that lets connections in and nothing through): retrying would only be sent there again
    if (o.kind === "lost") return this.stayOnWebSocket(port, `${o.why} before READY`);
    if (o.kind === "refused" && o.ours) return this.stayOnWebSocket(port, `what answers there is not a burrow server: ${o.message}`);
    return direct;
  }

  /** A link to the edge's direct port, or why there is none (Ctrl-C meanwhile closes it again). */
  private async open(server: URL, secure: boolean, port: number): Promise<Link | string> {
    const host = server.hostname.replace(/^\[|\]$/g, "");
    try {
      const link = await directLink({
        host,
        port,
        tls: secure ? { rejectUnauthorized: !this.client.opts.insecure, serverName: host } : undefined,
        timeoutMs: DIRECT_CONNECT_TIMEOUT_MS,
      });
      if (this.client.stopping) link.close();
      return link;
    } catch (err) {
      return (err as Error).message;
    }
  }

  /**
   * A session on the direct port remembered from before, or undefined when
   * that did not work out (the server restarted with another port, say):
   * then it is forgotten and the WebSocket asks as on a first connect. A
   * refusal from the server itself (AUTH_FAILED...) is the outcome as is.
   */
  private async reconnect(server: URL, secure: boolean, port: number): Promise<SessionResult | undefined> {
    const link = await this.open(server, secure, port);
    if (this.client.stopping) return { outcome: { kind: "stopped" }, wasReady: false };
    if (typeof link !== "string") {
      const r = await this.client.runSession(link, true, DIRECT_ANSWER_TIMEOUT_MS);
      const o = r.outcome;
      if (r.wasReady || this.client.stopping) return r;
      if (o.kind === "refused" && !o.ours) return r;
    }
    this.knownPort = undefined;
    return undefined;
  }

  /** The direct port did not work out: this run of the agent uses the WebSocket, starting now. */
  private stayOnWebSocket(port: number, why: string): Promise<SessionResult> {
    this.unreachable = true;
    this.client.opts.out.notice?.(`the server's direct port ${port} is out of reach (${why}); staying on the WebSocket`);
    return this.client.connectOnce();
  }
}
