/**
 * The agent's connection to the edge, whichever carries it: the WebSocket
 * (through any proxy, any TLS-terminating front) or the edge's direct port
 * (frames straight on TCP or TLS, taken when the edge offers it with MOVE).
 * A session sees only a Link: frames out, runs of whole frames in.
 */
import { runtime } from "../runtime/current.ts";
import type { RuntimeSocket, WebSocketOptions } from "../runtime/types.ts";
import { FrameReader } from "../protocol/frame-reader.ts";
import { ProtocolError, type Frame } from "../protocol/frames.ts";
import type { SendResult } from "../protocol/mux.ts";
import { SocketSender } from "./socket-sender.ts";
import { DIRECT_DATA_PAYLOAD } from "../protocol/wire.ts";

export interface Link {
  /** The connection is up (a direct link is up when it is made). */
  onOpen?: () => void;
  /** Whole frames, one or more. */
  onMessage?: (frames: Uint8Array) => void;
  /**
   * One frame the link decoded itself: on a direct link, a piece of a DATA
   * frame that reads cut (FrameReader), for Mux.receiveFrame(). A session
   * sets it beside onMessage.
   */
  onFrame?: (frame: Frame) => void;
  /** The peer sent bytes that are not frames: the session ends with PROTOCOL_ERROR. */
  onBadFrames?: (message: string) => void;
  /** Room to send again after "backpressure". */
  onDrain?: () => void;
  /** Gone, with why, as a person would read it. */
  onClose?: (why: string) => void;
  readonly isOpen: boolean;
  /** Largest DATA payload for the mux to send over it (MuxOptions.maxDataPayload); unset: the default. */
  readonly maxDataPayload?: number;
  send(frames: Uint8Array): SendResult;
  /** Ends the connection after what was sent (a closing handshake where there is one). */
  close(): void;
  /** Drops the connection at once: for a peer that no longer answers, whose closing handshake would never come. */
  terminate(): void;
}

/** Bytes queued in the WebSocket before writers pause. */
const SEND_BUFFER_LIMIT = 4 * 1024 * 1024;
const DRAIN_POLL_MS = 1;
/** WebSocket.OPEN, the same in every implementation. */
const OPEN = 1;

export function webSocketLink(url: string, options: WebSocketOptions): Link {
  const ws = runtime.webSocket(url, options);
  ws.binaryType = "nodebuffer"; // a Buffer view of the message, no extra ArrayBuffer copy
  // Bun's client WebSocket has no drain event: past the limit, writers pause and we poll
  let polling = false;
  const pollDrain = () => {
    if (ws.bufferedAmount < SEND_BUFFER_LIMIT / 2 || ws.readyState !== OPEN) {
      polling = false;
      link.onDrain?.();
    } else setTimeout(pollDrain, DRAIN_POLL_MS);
  };
  let opened = false;
  // the error event carries why a connection failed (refused, a certificate that does not verify...)
  let failure: string | undefined;
  const link: Link = {
    get isOpen() {
      return ws.readyState === OPEN;
    },
    send(frames) {
      if (ws.readyState !== OPEN) return "closed";
      ws.send(frames);
      if (ws.bufferedAmount <= SEND_BUFFER_LIMIT) return "sent";
      if (!polling) {
        polling = true;
        setTimeout(pollDrain, DRAIN_POLL_MS);
      }
      return "backpressure";
    },
    close: () => ws.close(1000),
    terminate: () => ws.terminate(),
  };
  ws.onopen = () => {
    opened = true;
    link.onOpen?.();
  };
  ws.onmessage = (ev) => {
    if (typeof ev.data !== "string") link.onMessage?.(ev.data as Uint8Array);
  };
  ws.onerror = (ev) => void (failure = describeSocketError(ev as Event));
  ws.onclose = (ev) =>
    link.onClose?.(
      ev.reason
        ? `connection closed (${ev.reason})`
        : opened
          ? "lost the connection to the server"
          : `could not reach the server${failure ? `: ${failure}` : ""}`,
    );
  return link;
}

export interface DirectTarget {
  host: string;
  port: number;
  /** TLS, verified as the WebSocket would be (same name, same --insecure). */
  tls?: { rejectUnauthorized: boolean; serverName: string };
  timeoutMs: number;
}

/** Connects to the edge's direct port; rejects with why when it cannot within the time given. */
export function directLink(target: DirectTarget): Promise<Link> {
  return new Promise((resolve, reject) => {
    let socket: RuntimeSocket<undefined> | undefined;
    let settled = false;
    let link: Link | undefined;
    const fail = (why: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket?.terminate();
      reject(new Error(why));
    };
    const timer = setTimeout(() => fail(`no connection within ${target.timeoutMs / 1000} s`), target.timeoutMs);
    let sender: SocketSender;
    let closed = false;
    const reader = new FrameReader(
      (frames) => link?.onMessage?.(frames),
      (piece) => link?.onFrame?.(piece),
    );
    const up = (s: RuntimeSocket<undefined>) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket = s;
      s.setNoDelay(true);
      sender = new SocketSender(s as RuntimeSocket);
      link = {
        get isOpen() {
          return !closed;
        },
        maxDataPayload: DIRECT_DATA_PAYLOAD,
        send: (frames) => (closed ? "closed" : sender.send(frames)),
        close: () => sender.end(),
        terminate: () => s.terminate(),
      };
      resolve(link);
    };
    runtime.connect<undefined>({
      hostname: target.host,
      port: target.port,
      ...(target.tls ? { tls: target.tls } : {}),
      socket: {
        // with TLS the link is up once the handshake verified the certificate
        open: (s) => {
          socket = s;
          if (!target.tls) up(s);
        },
        handshake: (s, ok, err) => (ok && !(err && target.tls?.rejectUnauthorized) ? up(s) : fail(describeTlsError(err))),
        data(_s, chunk) {
          try {
            reader.push(chunk);
          } catch (err) {
            if (!(err instanceof ProtocolError)) throw err;
            link?.onBadFrames?.(err.message);
          }
        },
        drain: () => {
          if (sender?.flush()) link?.onDrain?.();
        },
        close: () => {
          closed = true;
          if (!settled) return fail("connection closed");
          link?.onClose?.("lost the connection to the server");
        },
        error: (_s, err) => fail(err.message),
        connectError: (_s, err) => fail(err.message),
      },
    }).then(
      // given up on before it opened (the time limit): it must not linger, half made, keeping the process alive
      (s) => void (settled && !link ? s.terminate() : undefined),
      (err: Error) => fail(err.message),
    );
  });
}

function describeTlsError(err: Error | null | undefined): string {
  const why = err?.message ?? "TLS handshake failed";
  return /certificate/i.test(why) ? `${why} (--insecure accepts a certificate that does not verify)` : why;
}

/** "WebSocket connection to 'wss://…' failed: TLS handshake failed: self signed certificate" -> the part after "failed: ", with a hint for certificates. */
export function describeSocketError(ev: Event): string | undefined {
  const message = (ev as ErrorEvent).message;
  if (!message) return undefined;
  const why = message.replace(/^WebSocket connection to '[^']*' failed: /, "").split("\n")[0]!.slice(0, 200);
  if (/certificate|TLS handshake/i.test(why)) return `${why} (--insecure accepts a certificate that does not verify)`;
  // a server with HTTPS by ACME sends plain HTTP to HTTPS; a WebSocket does not follow redirects
  if (/status code: 30[178]\b/.test(why)) return `${why}: the server redirects to HTTPS; use --server https://...`;
  return why;
}
