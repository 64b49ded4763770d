/** The agent's side of a ws stream: its own WebSocket to the local service, relaying whole messages. */
import type { OpenMeta } from "../protocol/messages.ts";
import type { Stream } from "../protocol/mux.ts";
import { encodeCloseRecord, encodeRecord, RecordDecoder } from "../protocol/ws-records.ts";
import { WireError } from "../protocol/wire.ts";
import { localAuthority, type LocalTarget } from "./http.ts";
import type { ExchangeTap } from "./inspector/tap.ts";

/** Headers the local WebSocket handshake sets for itself. */
const OWN = new Set(["host", "sec-websocket-protocol", "sec-websocket-key", "sec-websocket-version", "sec-websocket-extensions", "content-length"]);

/** `onClose`: once, when the WebSocket is over (`opened`: the local service had taken the upgrade). */
export function serveWebSocketStream(stream: Stream, meta: OpenMeta, target: LocalTarget, onOpen: () => void, onClose?: (opened: boolean) => void, tap?: ExchangeTap): void {
  const head = meta.head!;
  const protocols = (head.headers.find(([n]) => n === "sec-websocket-protocol")?.[1] ?? "")
    .split(",")
    .map((p) => p.trim())
    .filter(Boolean);
  const headers: [string, string][] = head.headers.filter(([n]) => !OWN.has(n));
  // like http: the visitor's Host by default, the local address for "rewrite", else the name given
  const visitorHost = head.headers.find(([n]) => n === "host")?.[1];
  const host = target.hostHeader === "rewrite" ? undefined : (target.hostHeader ?? visitorHost);
  if (host) headers.push(["host", host]);
  const url = `${target.tls ? "wss" : "ws"}://${localAuthority(target)}${head.path}`;
  const ws = new WebSocket(url, { headers, protocols, perMessageDeflate: false, tls: { rejectUnauthorized: false } });
  ws.binaryType = "arraybuffer";
  let opened = false;
  const decoder = new RecordDecoder();
  ws.onopen = () => {
    opened = true;
    stream.reply({ protocol: ws.protocol || undefined });
    tap?.response(101, ws.protocol ? [["sec-websocket-protocol", ws.protocol]] : []);
    onOpen();
  };
  ws.onmessage = (ev) => {
    const data = typeof ev.data === "string" ? ev.data : new Uint8Array(ev.data as ArrayBuffer);
    tap?.message("service", data);
    // a slow visitor holds back credit: stop reading the local service until the stream drains
    if (!stream.write(encodeRecord(data))) ws.pause();
  };
  stream.onDrain = () => ws.resume();
  ws.onclose = (ev) => {
    onClose?.(opened);
    if (opened) tap?.done();
    else tap?.failed("WebSocket handshake failed");
    if (!opened) return stream.reset(`${WireError.UPSTREAM_FAILED} WebSocket handshake failed`);
    stream.write(encodeCloseRecord(ev.code, ev.reason));
    stream.end();
  };
  ws.onerror = () => {
    if (!opened) stream.reset(`${WireError.UPSTREAM_FAILED} WebSocket handshake failed`);
  };
  stream.onData = (chunk) => {
    stream.consumed(chunk.byteLength);
    try {
      decoder.push(
        chunk,
        (message) => {
          tap?.message("visitor", message);
          ws.send(message);
        },
        (code, reason) => ws.close(code, reason),
      );
    } catch {
      stream.reset();
      ws.close(1009);
    }
  };
  stream.onEnd = () => ws.close(1000);
  stream.whenReset(() => ws.readyState <= 1 && ws.close(1000));
}
