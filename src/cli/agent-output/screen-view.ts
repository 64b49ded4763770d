/**
 * What the live screen shows, drawn from its state: a pure function of the
 * state, the terminal's size, the paint and the time, so it is tested
 * without a terminal. Every line it returns fits the width (cut, never
 * wrapped) and there are never more lines than rows.
 */
import type { FlowEvent } from "../../agent/output.ts";
import { listed } from "../../agent/settings/tunnel-spec.ts";
import { KIND_NAMES, KIND_UNITS, type TunnelKind } from "../../protocol/kinds.ts";
import type { Paint } from "../colours.ts";
import type { TrafficCounters } from "./counters.ts";
import { printable } from "./print.ts";
import type { Recent } from "./recent.ts";
import { seconds } from "./lines.ts";

export type SessionStatus =
  | { kind: "connecting" }
  | { kind: "online" }
  /** The server said it is restarting: the agent is connecting again. */
  | { kind: "restarting" }
  /** `at`: when the next try starts (epoch ms). */
  | { kind: "reconnecting"; why: string; at: number; attempt: number }
  | { kind: "refused"; code: string; message: string };

/** One line of the screen's list of what came through. */
export type Activity =
  | { kind: "request"; time: string; tunnel: string; method: string; path: string; status: number | string; ms: number; route?: string }
  | { kind: "websocket-closed"; time: string; tunnel: string; path: string; ms: number }
  | { kind: "tcp"; time: string; tunnel: string; remote: string; open: boolean; bytesIn?: number; bytesOut?: number; ms?: number; error?: string }
  /** A udp flow: its datagrams and bytes each way, never payloads. */
  | ({ kind: "udp"; time: string; open: boolean } & Omit<FlowEvent, "event" | "live">);

export interface ScreenState {
  version: string;
  user?: string;
  server?: string;
  status: SessionStatus;
  latencyMs?: number;
  inspector?: string;
  tunnels: { name: string; url: string; local: string; protocol: TunnelKind }[];
  refusedTunnels: { name: string; code: string; message: string }[];
  notice?: string;
  counters: TrafficCounters;
  recent: Recent<Activity>;
}

export interface Size {
  columns: number;
  rows: number;
}

/** Widths of the label column ("Session Status", "Forwarding", ...) and of each counter's column: narrower on a narrow terminal. */
const WIDE = { label: 20, column: 8 };
const NARROW = { label: 16, column: 7 };

export function renderScreen(s: ScreenState, size: Size, p: Paint, now: number): string[] {
  const width = Math.max(1, size.columns);
  const { label: LABEL, column: COLUMN } = width < 80 ? NARROW : WIDE;
  const rows: string[] = [];
  const row = (label: string, value: string) => rows.push(`${label.padEnd(LABEL)}${value}`);

  const title = p.bold(`burrow ${s.version}`);
  const hint = "(Ctrl-C to quit)";
  const gap = width - `burrow ${s.version}`.length - hint.length;
  rows.push(gap >= 2 ? `${title}${" ".repeat(gap)}${p.dim(hint)}` : title);
  rows.push("");
  row("Session Status", status(s.status, p, now));
  // what the server sent (names, addresses, messages) is shown through printable(), like a visitor's path:
  // a hostile server must not be able to write escape codes to the terminal either
  row("User", printable(s.user ?? "-"));
  row("Server", printable(s.server ?? "-"));
  row("Latency", s.latencyMs === undefined ? "-" : `${Math.round(s.latencyMs)} ms`);
  if (s.inspector) row("Inspector", printable(s.inspector));
  const named = s.tunnels.length + s.refusedTunnels.length > 1;
  const nameWidth = named ? Math.max(...s.tunnels.map((t) => t.name.length), ...s.refusedTunnels.map((t) => t.name.length)) + 2 : 0;
  const name = (n: string) => (named ? p.bold(n.padEnd(nameWidth)) : "");
  for (const t of s.tunnels) row("Forwarding", `${name(t.name)}${printable(t.url)} -> ${t.local}`);
  for (const t of s.refusedTunnels) row("Refused", `${name(t.name)}${p.red(printable(t.code))} ${printable(t.message)}`);
  if (s.notice) row("Notice", printable(s.notice));
  rows.push("");

  const c = s.counters;
  const pct = c.percentiles();
  const ms = (v: number | undefined) => (v === undefined ? "-" : `${v < 10 ? v.toFixed(1) : Math.round(v)}ms`);
  row("Connections", ["total", "open", "rt1", "rt5", "p50", "p90"].map((h) => p.dim(h.padEnd(COLUMN))).join(""));
  row("", [String(c.total), String(c.open), c.rate(60).toFixed(2), c.rate(300).toFixed(2), ms(pct?.p50), ms(pct?.p90)].map((v) => v.padEnd(COLUMN)).join(""));
  rows.push("");

  const heading = headingOf(s.tunnels);
  rows.push(p.bold(heading));
  rows.push("-".repeat(heading.length));
  const room = size.rows - rows.length;
  if (room > 0) for (const a of s.recent.newest(room)) rows.push(activity(a, named ? nameWidth : 0, width, p));

  return rows.slice(0, Math.max(0, size.rows)).map((r) => fit(r, width).text);
}

/**
 * The heading over what came through, in the kinds' words (protocol/kinds/):
 * one kind's own ("TLS Connections"), or what their visitors' traffic is
 * called, together ("Requests and Connections"); tcp and tls, whose
 * visitors are both connections, are the first one's ("TCP Connections").
 */
export function headingOf(tunnels: readonly { protocol: TunnelKind }[]): string {
  const kinds = KIND_NAMES.filter((k) => tunnels.some((t) => t.protocol === k));
  const first = KIND_UNITS[kinds[0] ?? KIND_NAMES[0]!].display;
  const words = [...new Set(kinds.map((k) => KIND_UNITS[k].display.traffic))];
  return words.length <= 1 ? first.heading : listed(words);
}

function status(st: SessionStatus, p: Paint, now: number): string {
  switch (st.kind) {
    case "connecting":
      return p.yellow("connecting");
    case "online":
      return p.green("online");
    case "restarting":
      return `${p.yellow("reconnecting")} ${p.dim("(the server is restarting)")}`;
    case "reconnecting": {
      const inS = Math.ceil((st.at - now) / 1000);
      const head = inS > 0 ? `reconnecting in ${inS} s` : "reconnecting";
      return `${p.yellow(head)} ${p.dim(`(attempt ${st.attempt}: ${printable(st.why)})`)}`;
    }
    case "refused":
      return `${p.red(`refused: ${printable(st.code)}`)} ${printable(st.message)}`;
  }
}

function activity(a: Activity, nameWidth: number, width: number, p: Paint): string {
  const who = nameWidth > 0 ? p.bold(a.tunnel.padEnd(nameWidth).slice(0, nameWidth)) : "";
  const head = `${p.dim(a.time)}  ${who}`;
  if (a.kind === "tcp") {
    const what = a.open
      ? "connected"
      : a.error
        ? p.red(printable(a.error))
        : `closed  in ${a.bytesIn ?? 0} B, out ${a.bytesOut ?? 0} B${a.ms === undefined ? "" : `  ${seconds(a.ms)}`}`;
    return `${head}${"TCP".padEnd(8)}${a.remote}  ${what}`;
  }
  if (a.kind === "udp") {
    const counts = `in ${a.datagramsIn ?? 0} (${a.bytesIn ?? 0} B), out ${a.datagramsOut ?? 0} (${a.bytesOut ?? 0} B)${a.dropped ? `, ${a.dropped} dropped` : ""}`;
    const what = a.open ? "new flow" : `ended  ${counts}${a.ms === undefined ? "" : `  ${seconds(a.ms)}`}${a.error ? `  ${p.red(printable(a.error))}` : ""}`;
    return `${head}${"UDP".padEnd(8)}${a.remote}  ${what}`;
  }
  const method = a.kind === "request" ? a.method : "WS";
  const via = a.kind === "request" && a.route !== undefined ? p.dim(`  via ${printable(a.route)}`) : "";
  const tail = a.kind === "request" ? `${p.status(a.status)}  ${Math.round(a.ms)} ms${via}` : `closed after ${seconds(a.ms)}`;
  // the path takes what room the line has, so that the status stays in sight on a narrow terminal
  const used = 10 + nameWidth + 8;
  const pathWidth = Math.max(8, Math.min(60, width - used - 26));
  const path = fit(printable(a.path), pathWidth, "…");
  return `${head}${method.padEnd(7).slice(0, 7)} ${path.text}${" ".repeat(Math.max(0, pathWidth - path.width))}  ${tail}`;
}

const ESCAPE = /\x1b\[[0-9;?]*[A-Za-z]/y;

/**
 * `text` cut to `width` terminal columns (escape codes take none; wide
 * characters two), with `ellipsis` at the end when it was cut; colours
 * left on by the cut are reset.
 */
export function fit(text: string, width: number, ellipsis = ""): { text: string; width: number } {
  const whole = Bun.stringWidth(text);
  if (whole <= width) return { text, width: whole };
  const room = width - Bun.stringWidth(ellipsis);
  let out = "";
  let used = 0;
  let coloured = false;
  for (let i = 0; i < text.length; ) {
    if (text.charCodeAt(i) === 0x1b) {
      ESCAPE.lastIndex = i;
      const m = ESCAPE.exec(text);
      if (m) {
        out += m[0];
        coloured = true;
        i += m[0].length;
        continue;
      }
    }
    const ch = String.fromCodePoint(text.codePointAt(i)!);
    const w = Bun.stringWidth(ch);
    if (used + w > room) break;
    out += ch;
    used += w;
    i += ch.length;
  }
  if (room >= 0) {
    out += ellipsis;
    used += Bun.stringWidth(ellipsis);
  }
  return { text: coloured ? `${out}\x1b[0m` : out, width: used };
}
