/**
 * What an SSH session without -N shows, as `burrow http` prints it: the
 * tunnels' addresses as they go live, then a line per request or
 * connection; refusals on stderr. What comes before the session's channel
 * opens waits for it (a few lines at most). A client that does not read is
 * not written to past a bound: its lines are dropped and counted, never
 * queued without end. A visitor's path reaches a person's terminal here, so
 * control characters are shown as "?" (no visitor moves their cursor).
 */
import type { ServerChannel } from "ssh2";
import type { AgentOutput, ConnectionEvent, FlowEvent, RequestEvent, WebSocketClosedEvent } from "../agent/output.ts";

/** Bytes written to a channel the client does not read, past which lines are dropped. */
const MAX_UNREAD_BYTES = 256 * 1024;
/** Lines kept for a channel not open yet. */
const MAX_EARLY_LINES = 64;

const CONTROL = /[\x00-\x1f\x7f-\x9f]/g;
const printable = (text: string) => text.replace(CONTROL, "?");

function seconds(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const s = Math.round(ms / 1000);
  return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, "0")} s`;
}

const clock = () => new Date().toTimeString().slice(0, 8);

export class SessionView implements AgentOutput {
  private channel?: ServerChannel;
  /** The client asked for a terminal: lines end with CR LF (its terminal is raw). */
  private terminal = false;
  private early: { text: string; error: boolean }[] = [];
  /** Lines not written because the client did not read. */
  dropped = 0;
  /** Forward names shown before each line once there are several. */
  private named = false;

  /** Whether a person sees this session: its channel is open. */
  get open(): boolean {
    return this.channel !== undefined && !this.channel.destroyed;
  }

  /** The session's channel opened (shell or exec): what waited is written now. */
  attach(channel: ServerChannel, terminal: boolean): void {
    this.channel = channel;
    this.terminal = terminal;
    for (const l of this.early.splice(0)) this.write(l.text, l.error);
  }

  /** Several forwards: each line names its own. */
  several(): void {
    this.named = true;
  }

  /** A line for the person; `error` to stderr. */
  say(text: string, error = false): void {
    if (!this.channel) {
      if (this.early.length < MAX_EARLY_LINES) this.early.push({ text, error });
      return;
    }
    this.write(text, error);
  }

  /** Ends the session's channel with an exit status, after what it was told. */
  close(status: number): void {
    const channel = this.channel;
    if (!channel || channel.destroyed) return;
    channel.exit(status);
    channel.end();
  }

  private write(text: string, error: boolean): void {
    const channel = this.channel!;
    if (channel.destroyed || !channel.writable) return;
    if (channel.writableLength > MAX_UNREAD_BYTES) {
      this.dropped++;
      return;
    }
    const line = `${text}${this.terminal ? "\r\n" : "\n"}`;
    if (error) channel.stderr.write(line);
    else channel.write(line);
  }

  private who(tunnel: string): string {
    return this.named ? `${tunnel}  ` : "";
  }

  // -- AgentOutput: what the forwards' streams report, as burrow http prints it -----------------

  ready(): void {}

  request(l: RequestEvent): void {
    this.say(`${clock()}  ${this.who(l.tunnel)}${l.method.padEnd(7)} ${printable(l.path)}  ${printable(String(l.status))}  ${Math.round(l.ms)} ms`);
  }

  connection(l: ConnectionEvent): void {
    if (l.event === "open") return this.say(`${clock()}  ${this.who(l.tunnel)}connection from ${l.remote}`);
    if (l.error) return this.say(`${clock()}  ${this.who(l.tunnel)}closed ${l.remote}  ${printable(l.error)}`);
    this.say(`${clock()}  ${this.who(l.tunnel)}closed ${l.remote}  in ${l.bytesIn ?? 0} B, out ${l.bytesOut ?? 0} B`);
  }

  flow(_l: FlowEvent): void {}

  webSocketClosed(l: WebSocketClosedEvent): void {
    if (!l.opened) return this.say(`${clock()}  ${this.who(l.tunnel)}${"GET".padEnd(7)} ${printable(l.path)}  502 (WebSocket handshake failed)  ${Math.round(l.ms)} ms`);
    this.say(`${clock()}  ${this.who(l.tunnel)}WebSocket ${printable(l.path)} closed after ${seconds(l.ms)}`);
  }

  reconnecting(): void {}
  refused(): void {}
}
