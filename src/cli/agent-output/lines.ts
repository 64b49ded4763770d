/**
 * The agent's output as plain lines: what `burrow http` prints when stdout
 * is not a terminal (or the screen is not wanted). A line per request or
 * connection; with several tunnels each line names its tunnel.
 */
import type { AgentOutput } from "../../agent/output.ts";
import { paintFor } from "../colours.ts";
import { print, flushLines, timestamp } from "./print.ts";

export function lineOutput(): AgentOutput {
  const out = paintFor(process.stdout);
  const err = paintFor(process.stderr);
  /** Tunnel names shown only when there is more than one to tell apart. */
  let named = false;
  let width = 0;
  const who = (tunnel: string) => (named ? `${out.bold(tunnel.padEnd(width))}  ` : "");
  return {
    ready(r) {
      named = r.tunnels.length > 1;
      width = Math.max(0, ...r.tunnels.map((t) => t.name.length));
      for (const t of r.tunnels) print(`${out.green("Forwarding")}  ${who(t.name)}${out.bold(t.url)} -> ${t.local}   ${out.dim(`(user ${r.username})`)}`);
      print(out.dim("Press Ctrl-C to stop."));
    },
    request(l) {
      print(`${out.dim(timestamp())}  ${who(l.tunnel)}${l.method.padEnd(7)} ${l.path}  ${out.status(l.status)}  ${Math.round(l.ms)} ms`);
    },
    connection(l) {
      if (l.event === "open") print(`${timestamp()}  ${who(l.tunnel)}connection from ${l.remote}`);
      else print(`${timestamp()}  ${who(l.tunnel)}closed ${l.remote}  in ${l.bytesIn ?? 0} B, out ${l.bytesOut ?? 0} B`);
    },
    reconnecting(why, inMs, attempt) {
      print(`${out.dim(timestamp())}  ${out.yellow(`${why}; reconnecting in ${(inMs / 1000).toFixed(1)} s`)} (attempt ${attempt})`);
    },
    notice(message) {
      print(`${timestamp()}  ${message}`);
    },
    refused(code, message) {
      flushLines(); // what came before the refusal reads before it
      console.error(`burrow: ${err.red(`refused by the server: ${code}`)}: ${message}`);
    },
    tunnelRefused(name, code, message) {
      flushLines();
      console.error(`burrow: tunnel '${name}' ${err.red(`refused by the server: ${code}`)}: ${message}`);
    },
  };
}
