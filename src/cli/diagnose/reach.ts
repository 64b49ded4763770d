/**
 * The ways `burrow diagnose` reaches the server, as the agent does: a TCP
 * connection (straight, or through the HTTP or SOCKS proxy the agent
 * would use), TLS over it with the server's name, and one HTTP/1.1
 * exchange on that (a GET of the agents' path, a POST of the check). Each
 * step fails with an error whose message says what happened, in words.
 */
import { connect as tcpConnect, isIP, type Socket } from "node:net";
import { checkServerIdentity, connect as tlsConnect, type PeerCertificate, type TLSSocket } from "node:tls";
import { SocksClient } from "socks";
import { hidePassword } from "../../log-redact.ts";

export interface Server {
  /** The agent's --server URL (http: or https:). */
  url: URL;
  /** Without brackets. */
  host: string;
  port: number;
  secure: boolean;
}

export function serverOf(url: string): Server {
  const u = new URL(url);
  const secure = u.protocol === "https:" || u.protocol === "wss:";
  return { url: u, host: u.hostname.replace(/^\[|\]$/g, ""), port: Number(u.port || (secure ? 443 : 80)), secure };
}

/** A step's failure: `code` a short word for scripts (ECONNREFUSED, TIMEOUT, PROXY_REFUSED...). */
export class ReachError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** `promise`, or a ReachError TIMEOUT after `ms`; `onTimeout` lets go of what it held. */
export function within<T>(promise: Promise<T>, ms: number, what: string, onTimeout?: () => void): Promise<T> {
  let timer: ReturnType<typeof setTimeout>;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      onTimeout?.();
      reject(new ReachError("TIMEOUT", `no ${what} within ${ms / 1000} s`));
    }, ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/** A TCP connection to host:port; the address it reached is socket.remoteAddress. */
export function openTcp(host: string, port: number, timeoutMs: number): Promise<Socket> {
  const socket = tcpConnect({ host, port });
  return within(
    new Promise<Socket>((resolve, reject) => {
      socket.once("connect", () => resolve(socket));
      socket.once("error", (err: NodeJS.ErrnoException) => reject(new ReachError(err.code ?? "ERROR", err.message)));
    }),
    timeoutMs,
    `connection to ${host}:${port}`,
    () => socket.destroy(),
  );
}

export interface TlsFacts {
  socket: TLSSocket;
  /** The chain verified against the trusted CAs (Node's, and NODE_EXTRA_CA_CERTS). */
  authorized: boolean;
  /** Why it did not verify (CERT_HAS_EXPIRED, DEPTH_ZERO_SELF_SIGNED_CERT...). */
  authorizationError?: string;
  /** Why the certificate is not for the name (undefined: it is). */
  nameError?: string;
  cert: PeerCertificate;
}

/** TLS over `socket` naming `host`, verified after the handshake so that what is wrong can be told (never trusted here). */
export function openTls(socket: Socket, host: string, timeoutMs: number): Promise<TlsFacts> {
  const servername = isIP(host) ? undefined : host;
  const tls = tlsConnect({ socket, servername, rejectUnauthorized: false, ALPNProtocols: ["http/1.1"] });
  return within(
    new Promise<TlsFacts>((resolve, reject) => {
      tls.once("secureConnect", () => {
        const cert = tls.getPeerCertificate();
        const nameError = cert && Object.keys(cert).length > 0 ? checkServerIdentity(host, cert)?.message : "the server sent no certificate";
        const authorizationError = tls.authorizationError ? String((tls.authorizationError as Error).message ?? tls.authorizationError) : undefined;
        resolve({ socket: tls, authorized: tls.authorized, authorizationError, nameError, cert });
      });
      tls.once("error", (err: NodeJS.ErrnoException) => reject(new ReachError(err.code ?? "TLS", `TLS handshake failed: ${err.message}`)));
    }),
    timeoutMs,
    "TLS handshake",
    () => tls.destroy(),
  );
}

/**
 * A connection to host:port through `proxy` (http://, https:// or
 * socks5://): for an HTTP proxy a CONNECT (the agent's WebSocket goes so),
 * for SOCKS5 its handshake (the agent's bridge does the same).
 */
export async function openThroughProxy(proxy: URL, host: string, port: number, timeoutMs: number): Promise<Socket> {
  const shown = hidePassword(proxy.toString());
  if (proxy.protocol === "socks5:" || proxy.protocol === "socks5h:") {
    try {
      const { socket } = await SocksClient.createConnection({
        proxy: {
          host: proxy.hostname.replace(/^\[|\]$/g, ""),
          port: Number(proxy.port || 1080),
          type: 5,
          userId: proxy.username ? decodeURIComponent(proxy.username) : undefined,
          password: proxy.password ? decodeURIComponent(proxy.password) : undefined,
        },
        command: "connect",
        destination: { host, port },
        timeout: timeoutMs,
      });
      return socket;
    } catch (err) {
      const why = (err as Error).message;
      throw new ReachError(/timed out|timeout/i.test(why) ? "TIMEOUT" : /Socks5 proxy rejected connection|rejected/i.test(why) ? "PROXY_REFUSED" : "PROXY_FAILED", `the SOCKS proxy ${shown}: ${why}`);
    }
  }
  const proxyHost = proxy.hostname.replace(/^\[|\]$/g, "");
  const proxyPort = Number(proxy.port || (proxy.protocol === "https:" ? 443 : 80));
  let socket: Socket;
  try {
    socket = await openTcp(proxyHost, proxyPort, timeoutMs);
  } catch (err) {
    throw new ReachError((err as ReachError).code, `the proxy ${shown} cannot be reached: ${(err as Error).message}`);
  }
  if (proxy.protocol === "https:") socket = (await openTls(socket, proxyHost, timeoutMs)).socket;
  const authority = `${isIP(host) === 6 ? `[${host}]` : host}:${port}`;
  const auth = proxy.username ? `Proxy-Authorization: Basic ${Buffer.from(`${decodeURIComponent(proxy.username)}:${decodeURIComponent(proxy.password)}`).toString("base64")}\r\n` : "";
  socket.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n${auth}\r\n`);
  let head: Head;
  try {
    head = await readHead(socket, timeoutMs, "answer from the proxy");
  } catch (err) {
    socket.destroy();
    throw new ReachError((err as ReachError).code ?? "PROXY_FAILED", `the proxy ${shown}: ${(err as Error).message}`);
  }
  if (head.status !== 200) {
    socket.destroy();
    throw new ReachError("PROXY_REFUSED", `the proxy ${shown} refused to connect to ${authority}: ${head.status} ${head.reason}`);
  }
  return socket;
}

export interface Head {
  status: number;
  reason: string;
  headers: Map<string, string>;
  /** Bytes after the head that came with it. */
  rest: Buffer;
}

/** The largest response head read; a server's answer here is a few hundred bytes. */
const MAX_HEAD = 16 * 1024;
/** The largest body read (a check's answer: the user, and a line per tunnel). */
export const MAX_BODY = 1024 * 1024;

/** An HTTP/1.1 response head from `socket`, bounded; the socket is paused after it. */
function readHead(socket: Socket, timeoutMs: number, what: string): Promise<Head> {
  let got = Buffer.alloc(0);
  let onData: (b: Buffer) => void = () => {};
  let onEnd: () => void = () => {};
  const done = new Promise<Head>((resolve, reject) => {
    onData = (b: Buffer) => {
      got = Buffer.concat([got, b]);
      const end = got.indexOf("\r\n\r\n");
      if (end < 0) {
        if (got.length > MAX_HEAD) reject(new ReachError("BAD_ANSWER", "an answer head larger than 16 KiB"));
        return;
      }
      socket.pause();
      const lines = got.subarray(0, end).toString("latin1").split("\r\n");
      const m = /^HTTP\/1\.[01] (\d{3}) ?(.*)$/.exec(lines[0] ?? "");
      if (!m) return reject(new ReachError("BAD_ANSWER", `an answer that is not HTTP: ${JSON.stringify(lines[0]?.slice(0, 60))}`));
      const headers = new Map<string, string>();
      for (const line of lines.slice(1)) {
        const at = line.indexOf(":");
        if (at > 0) headers.set(line.slice(0, at).trim().toLowerCase(), line.slice(at + 1).trim());
      }
      resolve({ status: Number(m[1]), reason: m[2] ?? "", headers, rest: got.subarray(end + 4) });
    };
    onEnd = () => reject(new ReachError("CLOSED", "the connection closed before an answer"));
    socket.on("data", onData);
    socket.once("end", onEnd);
    socket.once("close", onEnd);
    socket.once("error", (err: NodeJS.ErrnoException) => reject(new ReachError(err.code ?? "ERROR", err.message)));
  });
  return within(done, timeoutMs, what).finally(() => {
    socket.off("data", onData);
    socket.off("end", onEnd);
    socket.off("close", onEnd);
  });
}

export interface Answer extends Omit<Head, "rest"> {
  body: string;
  /** Local time when the request went out and when the head came back (ms since the epoch). */
  sentAt: number;
  headAt: number;
}

/**
 * One request on `socket` (which it then closes), its answer read whole:
 * the head, then the body by its Content-Length or to the close, bounded.
 */
export async function exchange(socket: Socket, request: { method: string; path: string; host: string; body?: string }, timeoutMs: number): Promise<Answer> {
  const body = request.body ?? "";
  const sentAt = Date.now();
  try {
    socket.write(
      `${request.method} ${request.path} HTTP/1.1\r\nHost: ${request.host}\r\nUser-Agent: burrow-diagnose\r\nAccept: application/json\r\nConnection: close\r\n` +
        (request.body !== undefined ? `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` : "") +
        `\r\n${body}`,
    );
    const head = await readHead(socket, timeoutMs, "answer from the server");
    const headAt = Date.now();
    const length = head.headers.has("content-length") ? Number(head.headers.get("content-length")) : undefined;
    if (length !== undefined && !(length >= 0 && length <= MAX_BODY)) throw new ReachError("BAD_ANSWER", `an answer of ${length} bytes`);
    const chunked = /chunked/i.test(head.headers.get("transfer-encoding") ?? "");
    let got = head.rest;
    const whole = () => length !== undefined && got.length >= length;
    if (!whole()) {
      await within(
        new Promise<void>((resolve, reject) => {
          socket.on("data", (b: Buffer) => {
            got = Buffer.concat([got, b]);
            if (got.length > MAX_BODY + 64 * 1024) reject(new ReachError("BAD_ANSWER", "an answer larger than 1 MiB"));
            if (whole()) resolve();
          });
          socket.once("end", () => resolve());
          socket.once("close", () => resolve());
          socket.resume();
        }),
        timeoutMs,
        "answer's body",
      );
    }
    const raw = length !== undefined ? got.subarray(0, length) : got;
    return { status: head.status, reason: head.reason, headers: head.headers, body: (chunked ? dechunk(raw) : raw).toString("utf8"), sentAt, headAt };
  } finally {
    socket.destroy();
  }
}

/** A chunked body's data (what the edge's own answers never are; a proxy's might be). */
function dechunk(raw: Buffer): Buffer {
  const out: Buffer[] = [];
  let at = 0;
  for (;;) {
    const eol = raw.indexOf("\r\n", at);
    if (eol < 0) break;
    const size = parseInt(raw.subarray(at, eol).toString("latin1"), 16);
    if (!(size > 0)) break;
    out.push(raw.subarray(eol + 2, eol + 2 + size));
    at = eol + 2 + size + 2;
  }
  return Buffer.concat(out);
}
