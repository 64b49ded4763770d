/**
 * The live screen, for a person at a terminal (ngrok's): the session, the
 * tunnels, counters and the last requests, redrawn in place on the
 * terminal's alternate screen. Events only change the state and ask for a
 * draw; drawing happens at most every REDRAW_MS, writes only the lines that
 * changed, and waits while the terminal is slow to take them, so a busy
 * tunnel costs the screen ~10 draws a second, not one per request.
 *
 * Ctrl-C: stdin is put in raw mode (typed keys do not echo over the
 * screen), so Ctrl-C arrives as a byte and is turned into the SIGINT that
 * stops the agent; a second one when nothing listens any more ends the
 * process. finish() puts the terminal back as it was, then prints a
 * refusal where it stays visible. Should the process end some other way,
 * an exit hook still puts the terminal back.
 */
import { writeSync } from "node:fs";
import type { AgentOutput } from "../../agent/output.ts";
import { VERSION } from "../../version.ts";
import { paintFor } from "../colours.ts";
import type { OutputHandle } from "./handle.ts";
import { TrafficCounters } from "./counters.ts";
import { refusalLine } from "./lines.ts";
import { timestamp } from "./print.ts";
import { Recent } from "./recent.ts";
import { renderScreen, type Activity, type ScreenState } from "./screen-view.ts";

/** The shortest time between two draws: at most ~10 a second. */
export const REDRAW_MS = 100;
/** With no events the screen is still looked at this often: rates fall and countdowns run. */
const TICK_MS = 1000;
/** The most the list keeps (a taller terminal shows no more). */
const RECENT = 200;

/** Alternate screen, cursor hidden, no autowrap (a line that is too long can never wrap), cleared. */
const ENTER = "\x1b[?1049h\x1b[?25l\x1b[?7l\x1b[H\x1b[2J";
/** Attributes reset, autowrap back, cursor shown, the main screen back as it was. */
export const LEAVE = "\x1b[0m\x1b[?7h\x1b[?25h\x1b[?1049l";
const CTRL_C = 0x03;

export interface ScreenTerminal {
  stdout: NodeJS.WriteStream;
  /** Raw mode and Ctrl-C as a key, when it is a terminal too. */
  stdin?: NodeJS.ReadStream;
}

/** `server`: the one being connected to, shown until the first session says how it is reached. */
export function screenOutput(term: ScreenTerminal = { stdout: process.stdout, stdin: process.stdin }, server?: string): OutputHandle {
  const { stdout } = term;
  const stdin = term.stdin?.isTTY ? term.stdin : undefined;
  const p = paintFor(stdout);
  const state: ScreenState = {
    version: VERSION,
    status: { kind: "connecting" },
    server,
    tunnels: [],
    refusedTunnels: [],
    counters: new TrafficCounters(),
    recent: new Recent<Activity>(RECENT),
  };

  /** The lines on the terminal now. */
  let shown: string[] = [];
  /** Everything must be drawn again (a resize: the terminal may have moved things). */
  let clear = true;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let lastDraw = -Infinity;
  let waitingForDrain = false;
  let closed = false;

  const draw = () => {
    timer = undefined;
    if (closed || waitingForDrain) return;
    lastDraw = performance.now();
    const columns = stdout.columns || 80;
    const lines = renderScreen(state, { columns, rows: stdout.rows || 24 }, p, Date.now());
    let out = clear ? "\x1b[H\x1b[2J" : "";
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i]!;
      if (!clear && line === shown[i]) continue;
      // erasing the rest of a full-width line would erase its last character: the cursor is on it
      out += `\x1b[${i + 1};1H${line}${Bun.stringWidth(line) < columns ? "\x1b[K" : ""}`;
    }
    if (!clear && lines.length < shown.length) out += `\x1b[${lines.length + 1};1H\x1b[J`;
    clear = false;
    shown = lines;
    if (out === "") return;
    if (!stdout.write(out)) {
      // a slow terminal (a far ssh): draw again once it has taken this, not before
      waitingForDrain = true;
      stdout.once("drain", () => {
        waitingForDrain = false;
        schedule();
      });
    }
  };
  /** Asks for a draw: O(1), whatever the rate of events. */
  const schedule = () => {
    if (timer !== undefined || closed) return;
    timer = setTimeout(draw, Math.max(0, lastDraw + REDRAW_MS - performance.now()));
  };
  const resized = () => {
    clear = true;
    schedule();
  };
  const onKey = (data: Buffer) => {
    if (!data.includes(CTRL_C)) return;
    if (process.listenerCount("SIGINT") > 0) process.emit("SIGINT", "SIGINT");
    else {
      // pressed again while the agent is stopping (nothing listens for SIGINT any more): leave now
      restoreNow();
      process.exit(130);
    }
  };
  /** The terminal back as it was, synchronously (from an exit hook, or before process.exit). */
  const restoreNow = () => {
    if (closed) return;
    closed = true;
    try {
      stdin?.setRawMode(false);
    } catch {}
    try {
      writeSync((stdout as { fd?: number }).fd ?? 1, LEAVE);
    } catch {}
  };

  stdout.write(ENTER);
  if (stdin) {
    stdin.setRawMode(true);
    stdin.on("data", onKey);
    stdin.resume();
  }
  stdout.on("resize", resized);
  process.on("SIGWINCH", resized);
  process.on("exit", restoreNow);
  const tick = setInterval(schedule, TICK_MS);
  tick.unref();
  schedule();

  const add = (a: Activity) => {
    state.recent.add(a);
    schedule();
  };

  const events: AgentOutput = {
    ready(r) {
      state.user = r.username;
      state.server = r.server;
      state.status = { kind: "online" };
      state.tunnels = r.tunnels.map((t) => ({ name: t.name, url: t.url, local: t.local, protocol: t.protocol }));
      schedule();
    },
    streamOpened() {
      state.counters.arrived();
      schedule();
    },
    request(e) {
      if (e.kind !== "ws") state.counters.finished(e.ms); // a WebSocket is open until it closes
      add({ kind: "request", time: timestamp(), tunnel: e.tunnel, method: e.method, path: e.path, status: e.status, ms: e.ms, route: e.route });
    },
    webSocketClosed(e) {
      state.counters.finished(e.ms);
      if (e.opened) add({ kind: "websocket-closed", time: timestamp(), tunnel: e.tunnel, path: e.path, ms: e.ms });
      else add({ kind: "request", time: timestamp(), tunnel: e.tunnel, method: "GET", path: e.path, status: "502 (WebSocket handshake failed)", ms: e.ms });
    },
    connection(e) {
      if (e.event === "close") state.counters.finished(e.ms ?? 0);
      add({ kind: "tcp", time: timestamp(), tunnel: e.tunnel, remote: e.remote, open: e.event === "open", bytesIn: e.bytesIn, bytesOut: e.bytesOut, ms: e.ms, error: e.error });
    },
    flow(e) {
      if (e.event === "close") state.counters.finished(e.ms ?? 0);
      const { event, live: _live, ...flow } = e;
      add({ kind: "udp", time: timestamp(), open: event === "open", ...flow });
    },
    reconnecting(why, inMs, attempt) {
      state.status = { kind: "reconnecting", why, at: Date.now() + inMs, attempt };
      state.latencyMs = undefined; // a round trip to a server that is gone would be stale
      schedule();
    },
    restarting() {
      state.status = { kind: "restarting" };
      state.latencyMs = undefined;
      schedule();
    },
    notice(message) {
      state.notice = `${timestamp()}  ${message}`;
      schedule();
    },
    refused(code, message) {
      state.status = { kind: "refused", code, message };
      state.latencyMs = undefined;
      schedule();
    },
    tunnelRefused(name, code, message) {
      state.tunnels = state.tunnels.filter((t) => t.name !== name);
      state.refusedTunnels = [...state.refusedTunnels.filter((t) => t.name !== name), { name, code, message }];
      schedule();
    },
    tunnelAdded(t) {
      state.refusedTunnels = state.refusedTunnels.filter((r) => r.name !== t.name);
      state.tunnels = [...state.tunnels.filter((x) => x.name !== t.name), { name: t.name, url: t.url, local: t.local, protocol: t.protocol }];
      schedule();
    },
    tunnelRemoved(name) {
      state.tunnels = state.tunnels.filter((t) => t.name !== name);
      schedule();
    },
    latency(ms) {
      state.latencyMs = ms;
      schedule();
    },
    inspector(url) {
      state.inspector = url;
      schedule();
    },
  };

  return {
    ...events,
    async finish() {
      if (closed) return;
      closed = true;
      clearTimeout(timer);
      clearInterval(tick);
      stdout.off("resize", resized);
      process.off("SIGWINCH", resized);
      process.off("exit", restoreNow);
      if (stdin) {
        stdin.off("data", onKey);
        stdin.setRawMode(false);
        stdin.pause();
      }
      await new Promise<void>((resolve) => {
        // a terminal that went away never calls back: the agent still ends
        const gone = setTimeout(resolve, 1000);
        gone.unref();
        stdout.write(LEAVE, () => {
          clearTimeout(gone);
          resolve();
        });
      });
      // after the screen is gone, so that it stays in sight
      const st = state.status;
      if (st.kind === "refused") console.error(refusalLine(paintFor(process.stderr), st.code, st.message));
    },
  };
}
