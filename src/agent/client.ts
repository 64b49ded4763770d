/**
 * The agent: one WebSocket to the edge carrying every stream of its
 * tunnels. It says HELLO, prints what READY grants, serves streams, pings,
 * and on a lost connection retries for ever with backoff and jitter,
 * asking for the same name or port and resuming its session. It stops for
 * good only on a refusal that retrying cannot fix.
 */
import * as v from "valibot";
import { parseJsonPayload, ProtocolError } from "../protocol/frames.ts";
import { readOpenMeta, Ready, Refusal, type TunnelRequest } from "../protocol/messages.ts";
import { Mux, type Stream } from "../protocol/mux.ts";
import {
  CONNECT_PATH,
  DEAD_AFTER_MS,
  FrameType,
  KEEPALIVE_INTERVAL_MS,
  PROTOCOL_VERSION,
  RECONNECT_BASE_MS,
  RECONNECT_MAX_MS,
  WireError,
  type FrameTypeValue,
} from "../protocol/wire.ts";
import { VERSION } from "../version.ts";
import { serveHttpStream, type LocalTarget } from "./http.ts";
import { openSocksBridge, type SocksBridge } from "./socks.ts";
import { serveTcpStream } from "./tcp.ts";
import { serveWebSocketStream } from "./websocket.ts";

/** Refusals that no retry can fix: the agent exits. */
export const FATAL_CODES = new Set([
  "AUTH_FAILED",
  "TOKEN_DISABLED",
  "USER_DISABLED",
  "PROTOCOL_DENIED",
  "PROXY_DENIED",
  "TRAFFIC_EXCEEDED",
  "SUBDOMAIN_INVALID",
  "SUBDOMAIN_RESERVED",
  "VERSION_MISMATCH",
  "SESSION_REPLACED",
  "PROTOCOL_ERROR",
]);

/** Bytes queued in the WebSocket before writers pause. */
const SEND_BUFFER_LIMIT = 4 * 1024 * 1024;
const DRAIN_POLL_MS = 1;

export interface AgentOptions {
  server: string;
  token: string;
  tunnel: TunnelRequest;
  target: LocalTarget;
  proxy?: string;
  insecure?: boolean;
  out: AgentOutput;
}

/** Everything the agent tells the person running it. */
export interface AgentOutput {
  ready(r: Ready): void;
  request(line: { method: string; path: string; status: number | string; ms: number }): void;
  connection(line: { remote: string; event: "open" | "close"; bytesIn?: number; bytesOut?: number }): void;
  reconnecting(why: string, inMs: number, attempt: number): void;
  refused(code: string, message: string): void;
}

type Outcome = { kind: "refused"; code: string; message: string } | { kind: "lost"; why: string } | { kind: "stopped" };

export class Agent {
  private ws?: WebSocket;
  private mux?: Mux;
  private session?: string;
  private stopping = false;
  private wake?: () => void;
  /** What to ask for on reconnect: the name or port the server gave last time. */
  private request: TunnelRequest;

  constructor(private readonly opts: AgentOptions) {
    this.request = { ...opts.tunnel };
  }

  /** Runs until a fatal refusal (exit code 1) or stop() (exit code 0). */
  async run(): Promise<number> {
    let attempt = 0;
    let everReady = false;
    for (;;) {
      const { outcome, wasReady } = await this.connectOnce();
      if (wasReady) {
        everReady = true;
        attempt = 0;
      }
      if (outcome.kind === "stopped" || this.stopping) return 0;
      if (outcome.kind === "refused" && (FATAL_CODES.has(outcome.code) || !everReady)) {
        this.opts.out.refused(outcome.code, outcome.message);
        return 1;
      }
      const why = outcome.kind === "refused" ? `${outcome.code}: ${outcome.message}` : outcome.why;
      const delay = backoff(attempt++);
      this.opts.out.reconnecting(why, delay, attempt);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, delay);
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      if (this.stopping) return 0;
    }
  }

  /** Leaves on purpose: the server frees the tunnel's name or port at once. */
  stop(): void {
    this.stopping = true;
    this.wake?.();
    if (this.mux && !this.mux.closed && this.ws?.readyState === WebSocket.OPEN) {
      this.mux.sendControl(FrameType.GOAWAY);
    }
    this.ws?.close(1000);
  }

  private async connectOnce(): Promise<{ outcome: Outcome; wasReady: boolean }> {
    const server = new URL(connectUrl(this.opts.server));
    const secure = server.protocol === "wss:";
    const tls: Record<string, unknown> = { rejectUnauthorized: !this.opts.insecure };
    let options: Record<string, unknown> = { perMessageDeflate: false, tls };
    let url = server.toString();
    let bridge: SocksBridge | undefined;
    if (this.opts.proxy?.startsWith("socks5")) {
      try {
        bridge = await openSocksBridge(this.opts.proxy, { host: server.hostname, port: Number(server.port || (secure ? 443 : 80)) });
      } catch (err) {
        return { outcome: { kind: "lost", why: `SOCKS proxy: ${(err as Error).message}` }, wasReady: false };
      }
      // the WebSocket goes to the bridge but names the real server
      url = `${server.protocol}//${bridge.address}${server.pathname}`;
      options = { ...options, headers: { host: server.host } };
      tls.serverName = server.hostname;
    } else if (this.opts.proxy) {
      options.proxy = this.opts.proxy;
    }
    try {
      return await this.runSession(new WebSocket(url, options as Bun.WebSocketOptions));
    } catch (err) {
      return { outcome: { kind: "lost", why: (err as Error).message }, wasReady: false };
    } finally {
      bridge?.close();
    }
  }

  private runSession(ws: WebSocket): Promise<{ outcome: Outcome; wasReady: boolean }> {
    ws.binaryType = "nodebuffer"; // a Buffer view of the message, no extra ArrayBuffer copy
    this.ws = ws;
    return new Promise((resolve) => {
      let wasReady = false;
      let settled = false;
      const finish = (o: Outcome) => {
        if (settled) return;
        settled = true;
        clearInterval(keepalive);
        mux.close();
        resolve({ outcome: this.stopping ? { kind: "stopped" } : o, wasReady });
      };

      // Bun's client WebSocket has no drain event: past the limit, writers pause and we poll
      let polling = false;
      const pollDrain = () => {
        if (ws.bufferedAmount < SEND_BUFFER_LIMIT / 2 || ws.readyState !== WebSocket.OPEN) {
          polling = false;
          mux.drained();
        } else setTimeout(pollDrain, DRAIN_POLL_MS);
      };
      const mux = new Mux({
        role: "agent",
        send: (frame) => {
          if (ws.readyState !== WebSocket.OPEN) return "closed";
          ws.send(frame as Uint8Array<ArrayBuffer>);
          if (ws.bufferedAmount <= SEND_BUFFER_LIMIT) return "sent";
          if (!polling) {
            polling = true;
            setTimeout(pollDrain, DRAIN_POLL_MS);
          }
          return "backpressure";
        },
        onStream: (stream) => this.serve(stream),
        onControl: (type, payload) => this.control(type, payload, finish, () => (wasReady = true)),
        onClose: (code, message) => {
          if (code === WireError.PROTOCOL_ERROR) finish({ kind: "refused", code, message });
          ws.close(1000);
        },
      });
      this.mux = mux;
      const keepalive = setInterval(() => {
        if (Date.now() - mux.lastReceivedAt > DEAD_AFTER_MS) {
          finish({ kind: "lost", why: `no answer from the server for ${DEAD_AFTER_MS / 1000} s` });
          ws.close();
          return;
        }
        mux.ping();
      }, KEEPALIVE_INTERVAL_MS);

      let opened = false;
      ws.onopen = () => {
        opened = true;
        mux.lastReceivedAt = Date.now();
        mux.sendControl(FrameType.HELLO, {
          version: PROTOCOL_VERSION,
          token: this.opts.token,
          tunnels: [this.request],
          proxy: Boolean(this.opts.proxy),
          resume: this.session,
          agent: `burrow/${VERSION}`,
        });
      };
      ws.onmessage = (ev) => {
        if (typeof ev.data !== "string") mux.receive(ev.data as Uint8Array);
      };
      // the error event carries why a connection failed (refused, a certificate that does not verify...)
      let failure: string | undefined;
      ws.onerror = (ev) => void (failure = describeSocketError(ev));
      ws.onclose = (ev) =>
        finish({
          kind: "lost",
          why: ev.reason
            ? `connection closed (${ev.reason})`
            : opened
              ? "lost the connection to the server"
              : `could not reach the server${failure ? `: ${failure}` : ""}`,
        });
    });
  }

  private control(type: FrameTypeValue, payload: Uint8Array, finish: (o: Outcome) => void, markReady: () => void): void {
    if (type === FrameType.READY) {
      const parsed = v.safeParse(Ready, parseJsonPayload(payload, "READY"));
      if (!parsed.success) throw new ProtocolError(`bad READY: ${parsed.issues[0]?.message}`);
      const ready = parsed.output;
      this.session = ready.session;
      const granted = ready.tunnels[0];
      if (granted?.protocol === "http") this.request = { ...this.request, protocol: "http", subdomain: granted.subdomain } as TunnelRequest;
      if (granted?.protocol === "tcp") this.request = { protocol: "tcp", port: granted.port };
      markReady();
      this.opts.out.ready(ready);
    } else if (type === FrameType.ERROR) {
      const parsed = v.safeParse(Refusal, parseJsonPayload(payload, "ERROR"));
      const r = parsed.success ? parsed.output : { code: "PROTOCOL_ERROR", message: "malformed ERROR frame" };
      finish({ kind: "refused", code: r.code, message: r.message });
    }
  }

  private serve(stream: Stream): void {
    const meta = readOpenMeta(stream.meta);
    if (!meta) return stream.reset(WireError.PROTOCOL_ERROR);
    const target = this.opts.target;
    // one visitor's failure (a header the platform refuses, a local socket error) ends that
    // stream, never the agent
    const failed = (err: unknown) => stream.reset(`${WireError.UPSTREAM_FAILED} ${String((err as Error)?.message ?? err).slice(0, 100)}`);
    try {
      if (meta.kind === "http" && meta.head) {
        serveHttpStream(stream, meta, target, (line) => this.opts.out.request(line)).catch(failed);
      } else if (meta.kind === "ws" && meta.head) {
        serveWebSocketStream(stream, meta, target, () =>
          this.opts.out.request({ method: "GET", path: meta.head!.path, status: "101 websocket", ms: 0 }),
        );
      } else if (meta.kind === "tcp") {
        this.opts.out.connection({ remote: meta.remote, event: "open" });
        serveTcpStream(stream, target, (b) => this.opts.out.connection({ remote: meta.remote, event: "close", bytesIn: b.in, bytesOut: b.out })).catch(failed);
      } else {
        stream.reset(WireError.PROTOCOL_ERROR);
      }
    } catch (err) {
      failed(err);
    }
  }
}

/** "WebSocket connection to 'wss://…' failed: TLS handshake failed: self signed certificate" -> the part after "failed: ", with a hint for certificates. */
export function describeSocketError(ev: Event): string | undefined {
  const message = (ev as ErrorEvent).message;
  if (!message) return undefined;
  const why = message.replace(/^WebSocket connection to '[^']*' failed: /, "").split("\n")[0]!.slice(0, 200);
  return /certificate|TLS handshake/i.test(why) ? `${why} (--insecure accepts a certificate that does not verify)` : why;
}

/** Exponential backoff with jitter: half fixed, half random, capped. */
export function backoff(attempt: number): number {
  const ceiling = Math.min(RECONNECT_MAX_MS, RECONNECT_BASE_MS * 2 ** Math.min(attempt, 16));
  return Math.round(ceiling / 2 + Math.random() * (ceiling / 2));
}

export function connectUrl(server: string): string {
  const u = new URL(server);
  u.protocol = u.protocol === "https:" || u.protocol === "wss:" ? "wss:" : "ws:";
  u.pathname = CONNECT_PATH;
  u.search = "";
  return u.toString();
}
