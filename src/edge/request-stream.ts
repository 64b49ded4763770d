/**
 * The h1 stream a visitor connection's requests go to an agent on. Opened
 * with `keep` (protocol/messages.ts OpenMeta) for an agent that serves it,
 * it carries the connection's requests one after another, as the TCP path
 * carries a connection: between requests it is parked on the connection
 * (HttpConnection.parked), and the next request to the same tunnel's same
 * agent goes on it as DATA instead of opening a stream of its own. That is
 * a stream's whole life (OPEN, REPLY, FINs, the objects on both sides, the
 * agent's pool) saved per request on a kept-alive connection.
 *
 * The stream's handlers are set once, here, and passed to the request being
 * served (its exchange, forward.ts); while parked, anything the agent does
 * ends it: a FIN (it cannot carry another request after all), a reset, or
 * bytes nobody asked for, which break the protocol.
 */
import type { ResponseParser } from "../http/response-reader.ts";
import type { Stream } from "../protocol/mux.ts";
import { WireError } from "../protocol/wire.ts";
import type { AgentLink, Tunnel } from "./registry.ts";
import { ResponseWait, type ReplyWatch } from "./replies.ts";

/** The request being served on the stream: its exchange. */
export interface StreamUser {
  replied(): void;
  streamDrained(): void;
  fromAgent(chunk: Uint8Array): void;
  agentFin(): void;
  agentReset(code: string): void;
}

export class RequestStream {
  /** The request being served; undefined between requests. */
  user: StreamUser | undefined;
  /** This side is done with it (FIN sent or reset): it carries nothing more. */
  private over = false;
  /** The responses' reader: kept from one request to the next (forward.ts). */
  parser: ResponseParser | undefined;

  constructor(
    readonly stream: Stream,
    readonly tunnel: Tunnel,
    private readonly agent: AgentLink,
    /** Opened with `keep`: it may carry the connection's next request. */
    readonly keep: boolean,
  ) {
    stream.onReply = () => this.user?.replied();
    stream.onDrain = () => this.user?.streamDrained();
    stream.onData = (chunk) => (this.user ? this.user.fromAgent(chunk) : this.stray(chunk));
    stream.onEnd = () => (this.user ? this.user.agentFin() : this.drop());
    stream.whenReset((code) => {
      this.over = true;
      this.user?.agentReset(code);
    });
  }

  private wait: ResponseWait | undefined;

  /** Waits for the response of the request being served (replies.ts): one wait a stream, armed for each request. */
  awaitResponse(timeoutMs: number, watch: ReplyWatch): ResponseWait {
    return (this.wait ??= new ResponseWait(this.stream)).arm(timeoutMs, watch);
  }

  /** Whether `tunnel`'s next request may go on this stream. */
  carries(tunnel: Tunnel): boolean {
    const { stream } = this;
    return this.keep && !this.over && tunnel === this.tunnel && tunnel.agent === this.agent && !stream.isClosed && !stream.peerEnded;
  }

  /** No more requests for it: this side ends (the agent closes its local connection, and its side). */
  drop(): void {
    if (this.over) return;
    this.over = true;
    this.user = undefined;
    this.stream.end();
  }

  /** Bytes of the agent's between requests: after a response's end, that is a broken protocol. */
  private stray(chunk: Uint8Array): void {
    if (!this.keep) return this.stream.consumed(chunk.byteLength); // the rest of a response the edge stopped reading
    this.over = true;
    this.stream.reset(WireError.PROTOCOL_ERROR);
  }
}
