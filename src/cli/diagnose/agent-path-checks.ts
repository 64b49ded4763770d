/**
 * The agent's own ways in, tried as the agent goes: the WebSocket at
 * /_burrow/connect (through its proxy, as it opens it) and the direct
 * agent port the server names. Each is opened and carries a PING and its
 * PONG, the protocol's frames both ways; no HELLO is said, so nothing is
 * opened and no handshake is counted against this address.
 */
import { connectUrl } from "../../agent/client.ts";
import { openSocksBridge, type SocksBridge } from "../../agent/socks.ts";
import { Mux } from "../../protocol/mux.ts";
import type { WebSocketOptions } from "../../runtime/types.ts";
import { directLink, webSocketLink, type Link } from "../../sockets/links.ts";
import type { CheckResult } from "./checks.ts";
import { ms } from "./network-checks.ts";
import { within, type Server } from "./reach.ts";

/** A link's PING answered with a PONG within `timeoutMs`; rejects with why not. */
function pingPong(link: Link, timeoutMs: number, what: string): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    let settled = false;
    const done = (err?: Error, rtt?: number) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      mux.close();
      link.close();
      if (err) reject(err);
      else resolve(rtt!);
    };
    const timer = setTimeout(() => {
      done(new Error(link.isOpen ? `opened, but no answer to a PING within ${timeoutMs / 1000} s` : `no ${what} within ${timeoutMs / 1000} s`));
      link.terminate();
    }, timeoutMs);
    const mux = new Mux({
      role: "agent",
      send: (frames) => link.send(frames),
      onStream: (stream) => stream.reset("PROTOCOL_ERROR"),
      onControl: () => {},
      onClose: (code, message) => done(new Error(`the server closed it: ${code}${message ? ` (${message})` : ""}`)),
      onPong: (rtt) => done(undefined, rtt),
    });
    link.onOpen = () => mux.ping();
    link.onMessage = (frames) => mux.receive(frames);
    link.onFrame = (piece) => mux.receiveFrame(piece);
    link.onBadFrames = (message) => done(new Error(`what came back is not burrow's frames: ${message}`));
    link.onClose = (why) => done(new Error(why));
    if (link.isOpen) link.onOpen();
  });
}

/** The agents' WebSocket, opened as the agent opens it (client.ts connectOnce). */
export async function checkWebSocket(s: Server, proxy: string | undefined, insecure: boolean, timeoutMs: number): Promise<CheckResult> {
  const started = performance.now();
  const url = new URL(connectUrl(s.url.toString()));
  const tls: NonNullable<WebSocketOptions["tls"]> = { rejectUnauthorized: !insecure };
  let options: WebSocketOptions & { perMessageDeflate?: boolean } = { perMessageDeflate: false, tls };
  let target = url.toString();
  let bridge: SocksBridge | undefined;
  try {
    if (proxy?.startsWith("socks5")) {
      bridge = await within(openSocksBridge(proxy, { host: s.host, port: s.port }), timeoutMs, "SOCKS bridge");
      target = `${url.protocol}//${bridge.address}${url.pathname}`;
      options = { ...options, headers: { host: url.host } };
      tls.serverName = s.host;
    } else if (proxy) {
      options.proxy = proxy;
    }
    const rtt = await pingPong(webSocketLink(target, options), timeoutMs, "WebSocket");
    return { id: "websocket", status: "pass", detail: `${url.toString()} opens and answers a PING in ${rtt} ms`, ms: ms(started) };
  } catch (err) {
    return {
      id: "websocket",
      status: "fail",
      detail: `${url.toString()}: ${(err as Error).message}`,
      advice: "Whatever is in front of the server (a reverse proxy, a load balancer, a CDN) must pass WebSocket upgrades on /_burrow/connect and not close quiet connections under a minute; docs/production.md shows nginx's and Caddy's settings.",
      ms: ms(started),
    };
  } finally {
    bridge?.close();
  }
}

/**
 * The direct port the server names (GET /_burrow/connect): the agent moves
 * there when it can, and stays on the WebSocket when it cannot, so out of
 * reach is a warning, not a failure.
 */
export async function checkDirect(s: Server, port: number | null | undefined, proxied: boolean, insecure: boolean, timeoutMs: number): Promise<CheckResult> {
  if (proxied) return { id: "direct", status: "skip", detail: "through a proxy the agent stays on the WebSocket" };
  if (port === undefined) return { id: "direct", status: "skip", detail: "the server did not say whether it has a direct port (an older burrow)" };
  if (port === null) return { id: "direct", status: "skip", detail: "the server has no direct agent port: agents stay on the WebSocket" };
  const started = performance.now();
  try {
    const link = await directLink({ host: s.host, port, tls: s.secure ? { rejectUnauthorized: !insecure, serverName: s.host } : undefined, timeoutMs });
    const rtt = await pingPong(link, timeoutMs, "connection");
    return { id: "direct", status: "pass", detail: `port ${port} ${s.secure ? "(TLS) " : ""}answers a PING in ${rtt} ms: the agent moves there`, ms: ms(started) };
  } catch (err) {
    return {
      id: "direct",
      status: "warn",
      detail: `port ${port} is out of reach: ${(err as Error).message}`,
      advice: `The agent stays on the WebSocket, which works, at some cost in CPU and latency; open TCP port ${port} between here and the server for the faster path.`,
      ms: ms(started),
    };
  }
}
