/**
 * What the TCP and UDP port ranges share: the order ports are tried in,
 * and what a failed bind means.
 *
 * Only EADDRINUSE means "taken, try another port". Any other error (out of
 * descriptors, not permitted, an address not of this machine) is a failure
 * of the server, not of the port: it is logged with its code and the agent
 * is told that cause (still PORT_UNAVAILABLE, the code tunnels are refused
 * ports with), not that every port is taken.
 */
import { AppError } from "../core/errors.ts";

/** Random picks before scanning the range in order. */
const RANDOM_TRIES = 32;

/** Bind errors that every port would meet alike (the process or the system is out of descriptors): no other port is tried. */
export const EVERY_PORT = new Set(["EMFILE", "ENFILE"]);

/** What the agent is told, beside the code. */
const CAUSES: Record<string, string> = {
  EMFILE: "the server has too many open files",
  ENFILE: "the server's system has too many open files",
  EACCES: "the server is not permitted to listen on it",
  EADDRNOTAVAIL: "the server's --host is not an address of its machine",
};

/** A bind error that is not EADDRINUSE. */
export class ListenFailed {
  constructor(
    readonly port: number,
    readonly code: string,
    readonly err: string,
  ) {}

  refusal(): AppError {
    const cause = CAUSES[this.code] ?? "listening failed";
    return new AppError("PORT_UNAVAILABLE", `port ${this.port} could not be listened on: ${cause} (${this.code})`);
  }
}

/** A bind's error as the search reads it: "taken" (try another), or the failure. */
export function bindError(port: number, err: unknown): "taken" | ListenFailed {
  const code = (err as { code?: unknown }).code;
  if (code === "EADDRINUSE") return "taken"; // something else on this machine has it
  return new ListenFailed(port, typeof code === "string" ? code : "UNKNOWN", String(err));
}

/** The ports of a range in the order a search for any free one tries them: a few at random, then all in order. */
export function* searchOrder(range: { first: number; last: number }): Generator<number> {
  const size = range.last - range.first + 1;
  for (let i = 0; i < Math.min(RANDOM_TRIES, size); i++) yield range.first + Math.floor(Math.random() * size);
  for (let port = range.first; port <= range.last; port++) yield port;
}
