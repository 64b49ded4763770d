/**
 * One client of the SSH gateway, from its sign-in (sign-in.ts) to its end:
 * its `-R` forwards (forwards.ts), its `-L` channels to private tunnels
 * (reaches.ts), its session (what it shows: session-view.ts), and nothing
 * else. A shell, a command, SFTP, agent or
 * X11 forwarding and any other request or channel are refused: nothing
 * runs here. The session's remote command is read as the forwards'
 * options, so they wait for it: until the session asks for its shell or
 * command; or, when no session channel opens within NO_SESSION_MS of a
 * forward (OpenSSH opens it right after its forwards, and with -N never),
 * not longer; and OPTIONS_WAIT_MS at most.
 *
 * A connection the server ends says why twice: on the session, which it
 * closes, and in the DISCONNECT that follows once the client has closed
 * its side. OpenSSH prints a session's output only between its reads, and
 * a DISCONNECT ends it at once: sent together (one read under load), the
 * session's last lines would be lost; a session closed by the client has
 * been printed.
 */
import type { ClientInfo, Connection, ServerChannel, Session } from "ssh2";
import { keyDevice } from "../core/device-ids.ts";
import type { Core } from "../core/index.ts";
import type { EdgeContext } from "../edge/agent-context.ts";
import type { HandshakeGuard } from "../edge/handshake-guard.ts";
import { log } from "../log.ts";
import type { ForwardOptions, ForwardOptionsReader } from "./forward-options.ts";
import { Forwards } from "./forwards.ts";
import type { AgentSessionList } from "./memory-agent.ts";
import { Reaches } from "./reaches.ts";
import { SessionView } from "./session-view.ts";
import { SignIn } from "./sign-in.ts";
import { disconnectWith, DISCONNECT } from "./ssh2-extras.ts";

/** The longest forwards wait for the session's command (their options) when the client says nothing of it. */
export const OPTIONS_WAIT_MS = 1_000;
/** A client that opens no session channel this soon after a forward opens none (ssh -N): its forwards go on. */
export const NO_SESSION_MS = 200;
/** A connection ending with a session open: the longest its client has to print why (and close the session) before the DISCONNECT. */
export const TELL_GRACE_MS = 2_000;
/** Ctrl-C and Ctrl-D on a session's terminal end the connection, as Ctrl-C ends `burrow http`. */
const STOP_KEYS = new Set([0x03, 0x04]);

export interface GatewayContext {
  core: Core;
  edge: EdgeContext;
  guard?: HandshakeGuard;
  /** The edge's list of agents' sessions, which each forward's joins. */
  sessions: AgentSessionList;
  /** Reads a session's remote command as its forwards' options (the command line's flags: cli/ssh-options.ts). */
  forwardOptions: ForwardOptionsReader;
}

export class GatewayConnection {
  readonly signIn: SignIn;
  private readonly view = new SessionView();
  /** Made once the client has signed in: forwards and channels come only after. */
  private forwards?: Forwards;
  private reaches?: Reaches;
  /** It is ending (said why) or has ended. */
  private ending = false;
  private ended = false;
  /** Resolved when the forwards' options are known (the session's command, or none). */
  private optionsKnown!: () => void;
  private readonly options: Promise<void>;
  /** The session's command read as options; none until it comes (or does not). */
  private optioned?: ForwardOptions | { problem: string };
  private optionsTimer?: ReturnType<typeof setTimeout>;
  private noSessionTimer?: ReturnType<typeof setTimeout>;
  /** A session channel opened (its shell or command may still be to come). */
  private sessionSeen = false;
  private sessionOpen = false;
  /** The client closed the session's channel: it has printed what it was told there. */
  private sessionClosed = false;
  /** Ending: the words its DISCONNECT says, once the session has been read or TELL_GRACE_MS at most. */
  private leaving?: { description: string; timer: ReturnType<typeof setTimeout> };
  /** The last refusal said, for a client that has no session to be told on. */
  private lastRefusal = "";

  constructor(
    private readonly client: Connection,
    private readonly info: { remote: string; address: string },
    private readonly ctx: GatewayContext,
    /** Signed in: the connection is no longer a handshake (the gateway's counts). */
    private readonly onSignedIn: () => void,
  ) {
    this.signIn = new SignIn(client, ctx.core, ctx.guard, info.address);
    this.options = new Promise((resolve) => (this.optionsKnown = resolve));
    const say = this.view.say.bind(this.view);
    this.view.say = (text, error) => {
      if (error) this.lastRefusal = text;
      say(text, error);
    };
    client.on("authentication", (authCtx) => this.signIn.attempt(authCtx));
    client.on("ready", () => this.ready());
    client.on("request", (accept, reject, name, req) => this.request(accept, reject, name, req));
    client.on("session", (accept) => {
      this.sessionSeen = true;
      clearTimeout(this.noSessionTimer);
      this.session(accept());
    });
    // ssh2 hears channels only once the client has signed in
    client.on("tcpip", (accept, reject, req) => (this.reaches && !this.ending ? this.reaches.channel(accept, reject, req) : reject()));
    // a reset, a bad packet, a keepalive timeout: the connection ends (close), nothing to say about it
    client.on("error", () => {});
    client.on("close", () => this.closed());
  }

  /**
   * Ends the connection, saying why: nothing more is served; a session is
   * told and closed (one whose shell is on its way, when it comes), and
   * the DISCONNECT waits for the client to close it.
   */
  end(description: string): void {
    if (this.ending) return;
    this.ending = true;
    this.view.say(description, true);
    this.forwards?.dropAll();
    this.reaches?.closeAll();
    this.leaving = { description, timer: setTimeout(() => this.disconnect(), TELL_GRACE_MS) };
    if (this.sessionOpen && !this.sessionClosed) this.view.close(1);
    else if (!this.sessionSeen || this.sessionOpen) this.disconnect();
  }

  /** The DISCONNECT of a connection that was told why it ends. */
  private disconnect(): void {
    const leaving = this.leaving;
    if (!leaving || this.ended) return;
    this.leaving = undefined;
    clearTimeout(leaving.timer);
    disconnectWith(this.client, DISCONNECT.BY_APPLICATION, leaving.description);
  }

  private ready(): void {
    const signed = this.signIn.signedIn!;
    this.forwards = new Forwards({
      client: this.client,
      edge: this.ctx.edge,
      sessions: this.ctx.sessions,
      peer: { remote: this.info.remote, address: this.info.address, sshKey: signed.key.id },
      view: this.view,
      endConnection: (code, message) => this.end(`burrow: ${code}: ${message}`),
      settle: () => this.settle(),
    });
    this.reaches = new Reaches({
      client: this.client,
      edge: this.ctx.edge,
      remote: this.info.remote,
      address: this.info.address,
      key: { id: signed.key.id, device: keyDevice(signed.key.id) },
      user: { id: signed.user.id, username: signed.user.username },
      view: this.view,
      endConnection: (code, message) => this.end(`burrow: ${code}: ${message}`),
    });
    this.onSignedIn();
    const { core } = this.ctx;
    core.sshKeys.touch(signed.key.id).catch(() => {});
    void core.audit.record({ action: "ssh.session", address: this.info.address, outcome: "ok", userId: signed.user.id, username: signed.user.username, target: `ssh-key:${signed.key.id}`, details: { fingerprint: signed.key.fingerprint } });
    log.info("ssh client signed in", { remote: this.info.remote, user: signed.user.username, key: signed.key.id });
  }

  private request(accept: ((port?: number) => void) | undefined, reject: (() => void) | undefined, name: string, req: { bindAddr: string; bindPort: number }): void {
    if (name === "tcpip-forward") {
      this.optionsTimer ??= setTimeout(() => this.optionsKnown(), OPTIONS_WAIT_MS);
      if (!this.sessionSeen) this.noSessionTimer ??= setTimeout(() => this.sessionSeen || this.optionsKnown(), NO_SESSION_MS);
      void this.options.then(() => {
        if (this.ending || !this.forwards) return;
        const options = (this.optioned ??= this.ctx.forwardOptions(""));
        if ("problem" in options) return reject?.();
        this.forwards.ask(req.bindAddr, req.bindPort, { accept, reject }, options);
      });
      return;
    }
    if (name === "cancel-tcpip-forward") return this.forwards?.cancel(req.bindAddr, req.bindPort) ? accept?.() : reject?.();
    reject?.();
  }

  /** A session channel: what the person sees, and the command that carries the forwards' options. */
  private session(session: Session): void {
    let terminal = false;
    session.on("pty", (accept) => {
      terminal = true;
      accept?.();
    });
    session.on("window-change", (accept) => accept?.());
    session.on("env", (_accept, reject) => reject?.());
    session.on("shell", (accept) => this.attach(accept(), terminal, ""));
    session.on("exec", (accept, _reject, info) => this.attach(accept(), terminal, info.command));
    // subsystems (sftp), agent and X11 forwarding, signals: not listened to, so ssh2 refuses them
  }

  private attach(channel: ServerChannel, terminal: boolean, command: string): void {
    if (this.sessionOpen) return void channel.end();
    this.sessionOpen = true;
    channel.on("data", (bytes: Buffer) => {
      if (terminal && bytes.some((b) => STOP_KEYS.has(b))) this.end("burrow: stopped");
    });
    // read to its end, the channel closes when the client closes it (ssh2 says "close" after "end")
    channel.once("close", () => {
      this.sessionClosed = true;
      this.disconnect();
    });
    // what waited for the session is written now; a connection already ending has nothing more to show
    this.view.attach(channel, terminal);
    if (this.ending) return this.view.close(1);
    const signed = this.signIn.signedIn;
    if (signed) this.view.say(`burrow: signed in as ${signed.user.username} with key '${signed.key.name}' (${signed.key.fingerprint})`);
    this.optioned = this.ctx.forwardOptions(command);
    if ("problem" in this.optioned) {
      // the CLI's words for it, then the session ends as the command would have (exit 2)
      this.view.say(`burrow: ${this.optioned.problem}`, true);
      this.lastRefusal = `burrow: ${this.optioned.problem}`;
      this.view.close(2);
    }
    // the session's end is not the connection's: its forwards go on until the client leaves
    this.optionsKnown();
  }

  /** A forward ended, or the session: with nothing left to serve, the connection ends, saying the last refusal. */
  private settle(): void {
    if (this.ending || (this.forwards?.size ?? 0) > 0) return;
    this.end(this.lastRefusal || "burrow: nothing left to forward");
  }

  private closed(): void {
    if (this.ended) return;
    this.ended = this.ending = true;
    clearTimeout(this.optionsTimer);
    clearTimeout(this.leaving?.timer);
    clearTimeout(this.noSessionTimer);
    this.optionsKnown();
    this.forwards?.dropAll();
    this.reaches?.closeAll();
    this.signIn.ended();
  }
}

export type { ClientInfo };
