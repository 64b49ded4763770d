/**
 * The agent's output as plain lines: what `burrow http` prints when stdout
 * is not a terminal, or with --log text. A line per request or connection;
 * with several tunnels each line names its tunnel. Lines under the
 * --log-level threshold are not printed (requests are info, reconnecting
 * warn, refusals error; see levels.ts).
 */
import type { AgentOutput } from "../../agent/output.ts";
import { paintFor, type Paint } from "../colours.ts";
import { DEFAULT_LOG_LEVEL, shown, type LogLevel } from "./levels.ts";
import { print, printLater, flushLines, printable, timestamp, type LineFormat } from "./print.ts";
import type { RequestEvent } from "../../agent/output.ts";

export function lineOutput(threshold: LogLevel = DEFAULT_LOG_LEVEL): AgentOutput {
  const out = paintFor(process.stdout);
  const err = paintFor(process.stderr);
  const on = (level: LogLevel) => shown(level, threshold);
  /** Request lines are info: asked once, not for every request. */
  const requestsShown = on("info");
  /**
   * Tunnel names shown only when there is more than one to tell apart: the
   * running ones and those the server refused (which come before ready), as
   * the screen counts them, so a file of several tunnels names its lines even
   * when only one of them runs.
   */
  let named = false;
  let width = 0;
  const refusedNames = new Set<string>();
  /** The tunnels running now (READY's, and those added since). */
  let running = new Set<string>();
  const who = (tunnel: string) => (named ? `${out.bold(tunnel.padEnd(width))}  ` : "");
  /** A request's line, made when its batch is written (print.ts). */
  const requestLine: LineFormat<RequestEvent> = (l, stamp) =>
    `${out.dim(stamp)}  ${who(l.tunnel)}${padMethod(l.method)} ${printable(l.path)}  ${out.status(l.status)}  ${Math.round(l.ms)} ms${l.route !== undefined ? out.dim(`  via ${printable(l.route)}`) : ""}`;
  return {
    ready(r) {
      flushLines(); // lines queued so far are made with the names as they were
      running = new Set(r.tunnels.map((t) => t.name));
      const names = new Set([...running, ...refusedNames]);
      named = names.size > 1;
      width = Math.max(0, ...[...names].map((n) => n.length));
      if (!on("info")) return;
      for (const t of r.tunnels) {
        print(`${out.green("Forwarding")}  ${who(t.name)}${out.bold(t.url)} -> ${t.local}   ${out.dim(`(user ${r.username})`)}`);
        if (t.private) {
          const shared = t.private.shares.length > 0 ? `shared with ${t.private.shares.join(", ")}` : "shared with no one: only you";
          print(`${out.dim("Private")}     ${who(t.name)}not public; reach it with  burrow connect ${t.private.target}   ${out.dim(`(${shared})`)}`);
        }
      }
      print(out.dim("Press Ctrl-C to stop."));
    },
    request(l) {
      if (requestsShown) printLater(l, requestLine);
    },
    connection(l) {
      if (!on("info")) return;
      if (l.event === "open") print(`${timestamp()}  ${who(l.tunnel)}connection from ${l.remote}`);
      else if (l.error) print(`${timestamp()}  ${who(l.tunnel)}closed ${l.remote}  ${out.red(l.error)}`);
      else print(`${timestamp()}  ${who(l.tunnel)}closed ${l.remote}  in ${l.bytesIn ?? 0} B, out ${l.bytesOut ?? 0} B`);
    },
    flow(l) {
      if (!on("info")) return;
      if (l.event === "open") return print(`${timestamp()}  ${who(l.tunnel)}udp flow from ${l.remote}`);
      const counts = `in ${l.datagramsIn ?? 0} (${l.bytesIn ?? 0} B), out ${l.datagramsOut ?? 0} (${l.bytesOut ?? 0} B)${l.dropped ? `, ${l.dropped} dropped` : ""}`;
      print(`${timestamp()}  ${who(l.tunnel)}udp flow ${l.remote} ended after ${seconds(l.ms ?? 0)}  ${counts}${l.error ? `  ${out.red(l.error)}` : ""}`);
    },
    webSocketClosed(l) {
      if (!on("info")) return;
      // a handshake the local service refused had no request line: this is its line
      if (!l.opened) print(`${out.dim(timestamp())}  ${who(l.tunnel)}${"GET".padEnd(7)} ${printable(l.path)}  ${out.status(502, "502 (WebSocket handshake failed)")}  ${Math.round(l.ms)} ms`);
      else print(`${out.dim(timestamp())}  ${who(l.tunnel)}WebSocket ${printable(l.path)} closed after ${seconds(l.ms)}`);
    },
    reconnecting(why, inMs, attempt) {
      if (!on("warn")) return;
      print(`${out.dim(timestamp())}  ${out.yellow(`${printable(why)}; reconnecting in ${(inMs / 1000).toFixed(1)} s`)} (attempt ${attempt})`);
    },
    restarting() {
      if (on("warn")) print(`${out.dim(timestamp())}  ${out.yellow("the server is restarting: connecting again")}`);
    },
    notice(message) {
      if (on("info")) print(`${timestamp()}  ${printable(message)}`);
    },
    refused(code, message) {
      flushLines(); // what came before the refusal reads before it
      console.error(refusalLine(err, code, message));
    },
    tunnelAdded(t) {
      flushLines();
      // a second tunnel: lines name their tunnel from now on
      running.add(t.name);
      named = named || new Set([...running, ...refusedNames]).size > 1;
      width = Math.max(width, t.name.length);
      if (on("info")) print(`${out.green("Forwarding")}  ${who(t.name)}${out.bold(t.url)} -> ${t.local}   ${out.dim("(added)")}`);
    },
    tunnelRemoved(name) {
      running.delete(name);
      flushLines();
      if (on("info")) print(`${timestamp()}  ${who(name)}tunnel '${printable(name)}' removed`);
    },
    tunnelRefused(name, code, message) {
      refusedNames.add(name);
      flushLines();
      console.error(`burrow: tunnel '${name}' ${err.red(`refused by the server: ${printable(code)}`)}: ${printable(message)}`);
    },
    latency(ms) {
      if (on("debug")) print(`${out.dim(timestamp())}  latency ${Math.round(ms)} ms`);
    },
    inspector(url) {
      if (on("info")) print(`${out.green("Inspector")}   ${out.bold(url)}`);
    },
  };
}

/** The common methods in their column of 7, made once (a Map: a visitor's method may be any token, "constructor" too). */
const PADDED = new Map(["GET", "POST", "PUT", "HEAD", "DELETE", "PATCH", "OPTIONS"].map((m) => [m, m.padEnd(7)]));
function padMethod(method: string): string {
  return PADDED.get(method) ?? method.padEnd(7);
}

/** The line a refusal of the whole session leaves on stderr (also after the screen closes); the server's words made printable. */
export function refusalLine(paint: Paint, code: string, message: string): string {
  return `burrow: ${paint.red(`refused by the server: ${printable(code)}`)}: ${printable(message)}`;
}

/** 850 ms, 12.3 s, 4 min 05 s */
export function seconds(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const s = Math.round(ms / 1000);
  return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, "0")} s`;
}
