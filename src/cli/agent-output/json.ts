/**
 * The agent's output for scripts (--log json): one JSON object per line per
 * event, on stdout, refusals included. Every object has `time` (ISO 8601,
 * UTC), `level` and `event`; the other fields are the event's, snake_case,
 * and stay as they are (docs/agent.md, "--log json events"). Events under the
 * --log-level threshold cost one comparison.
 */
import type { AgentOutput, RequestEvent } from "../../agent/output.ts";
import { shown, type LogLevel } from "./levels.ts";
import { print } from "./print.ts";

type Fields = Record<string, unknown>;

let isoMs = 0;
let isoText = "";
/** The time in ISO 8601, made once per millisecond (a busy tunnel logs many requests in one). */
function isoNow(): string {
  const ms = Date.now();
  if (ms !== isoMs) {
    isoMs = ms;
    isoText = new Date(ms).toISOString();
  }
  return isoText;
}

/** `write`: where each line goes (tests catch them; the agent batches them onto stdout). */
export function jsonOutput(threshold: LogLevel, write: (line: string) => void = print): AgentOutput {
  const on = (level: LogLevel) => shown(level, threshold);
  const emit = (level: LogLevel, event: string, fields: Fields) => write(JSON.stringify({ time: isoNow(), level, event, ...fields }));
  /** Whether a session is up: a lost one is a "disconnect" before its "reconnecting". */
  let connected = false;
  return {
    ready(r) {
      connected = true;
      if (!on("info")) return;
      const tunnels = r.tunnels.map((t) => ({ name: t.name, protocol: t.protocol, url: t.url, local: t.local }));
      emit("info", "connect", { user: r.username, session: r.session, server: r.server, tunnels });
    },
    request(e) {
      if (on("info")) emit("info", "request", requestFields(e));
    },
    connection(e) {
      if (!on("info")) return;
      if (e.event === "open") return emit("info", "tcp_open", { tunnel: e.tunnel, remote: e.remote });
      emit("info", "tcp_close", {
        tunnel: e.tunnel,
        remote: e.remote,
        bytes_in: e.bytesIn ?? 0,
        bytes_out: e.bytesOut ?? 0,
        duration_ms: e.ms === undefined ? undefined : round(e.ms),
        error: e.error,
      });
    },
    flow(e) {
      if (!on("info")) return;
      if (e.event === "open") return emit("info", "udp_flow_open", { tunnel: e.tunnel, remote: e.remote });
      emit("info", "udp_flow_close", {
        tunnel: e.tunnel,
        remote: e.remote,
        datagrams_in: e.datagramsIn ?? 0,
        datagrams_out: e.datagramsOut ?? 0,
        bytes_in: e.bytesIn ?? 0,
        bytes_out: e.bytesOut ?? 0,
        dropped: e.dropped ?? 0,
        duration_ms: e.ms === undefined ? undefined : round(e.ms),
        error: e.error,
      });
    },
    webSocketClosed(e) {
      if (on("info")) emit("info", "websocket_close", { tunnel: e.tunnel, path: e.path, duration_ms: round(e.ms), opened: e.opened });
    },
    streamOpened(e) {
      if (on("debug")) emit("debug", "stream_open", { tunnel: e.tunnel, kind: e.kind });
    },
    reconnecting(why, inMs, attempt) {
      if (connected && on("warn")) emit("warn", "disconnect", { reason: why });
      connected = false;
      if (on("warn")) emit("warn", "reconnecting", { reason: why, in_ms: Math.round(inMs), attempt });
    },
    restarting() {
      if (connected && on("warn")) emit("warn", "disconnect", { reason: "the server is restarting" });
      connected = false;
      if (on("warn")) emit("warn", "restarting", {});
    },
    notice(message) {
      if (on("info")) emit("info", "notice", { message });
    },
    refused(code, message) {
      connected = false;
      emit("error", "refusal", { code, message });
    },
    tunnelRefused(name, code, message) {
      emit("error", "tunnel_refused", { tunnel: name, code, message });
    },
    tunnelAdded(t) {
      if (on("info")) emit("info", "tunnel_added", { tunnel: t.name, protocol: t.protocol, url: t.url, local: t.local });
    },
    tunnelRemoved(name) {
      if (on("info")) emit("info", "tunnel_removed", { tunnel: name });
    },
    latency(ms) {
      if (on("debug")) emit("debug", "latency", { ms: round(ms) });
    },
    inspector(url) {
      if (on("info")) emit("info", "inspector", { url });
    },
  };
}

/**
 * A request's fields: `status` is the number the visitor got, or null when
 * none was given ("cancelled"); why it failed goes in `error` (the agent
 * shows a failure as "502 (connection refused)").
 */
export function requestFields(e: RequestEvent): Fields {
  let status: number | null;
  let error: string | undefined;
  if (typeof e.status === "number") status = e.status;
  else {
    const m = /^(\d{3})\b(?:\s*\((.*)\))?/.exec(e.status);
    status = m ? Number(m[1]) : null;
    error = m ? m[2] : e.status;
  }
  return {
    tunnel: e.tunnel,
    method: e.method,
    path: e.path,
    status,
    duration_ms: round(e.ms),
    websocket: e.kind === "ws" || undefined,
    route: e.route,
    error,
  };
}

/** Milliseconds to a tenth: enough for a person, and short. */
const round = (ms: number) => Math.round(ms * 10) / 10;
