/**
 * One stream the edge opened, served by the kind it is (OPEN's `kind`):
 * each tunnel kind's unit in kinds/ serves its own (an HTTP request, a TCP
 * or TLS connection, a UDP flow) to its tunnel's local service. One
 * visitor's failure (a head the agent cannot read, a local socket error)
 * ends that stream, never the agent.
 */
import type { OpenMeta } from "../protocol/messages.ts";
import type { Stream } from "../protocol/mux.ts";
import { WireError } from "../protocol/wire.ts";
import type { RequestTaps } from "./inspector/tap.ts";
import { SERVE_BY_STREAM } from "./kinds/index.ts";
import type { AgentOutput, TunnelView } from "./output.ts";

/** `inspector`: where HTTP requests and WebSockets of tunnels with `inspect` on are captured, when it runs. */
export function serveStream(stream: Stream, meta: OpenMeta, tunnel: TunnelView, out: AgentOutput, inspector?: RequestTaps): void {
  const serve = SERVE_BY_STREAM[meta.kind];
  if (serve === undefined) return stream.reset(WireError.PROTOCOL_ERROR);
  serve(stream, meta, tunnel, out, inspector);
}
