/**
 * `burrow http`'s flags for the agent's HTTP/2 connection to the service
 * (with --upstream-protocol h2c or h2): one a limit, named as the server's
 * --h2-* flag for the same bound toward visitors. Their ranges and
 * defaults are the options' (agent/settings/upstream-h2.ts); like the
 * tunnel's other flags they have no environment variable.
 */
import type { FlagSpec, FlagTable } from "../config/flags.ts";
import { UPSTREAM_H2_OPTIONS, upstreamH2Default, type UpstreamH2OptionName } from "../agent/settings/upstream-h2.ts";

function flag(option: UpstreamH2OptionName, arg: string, help: string, past: string): FlagSpec {
  const { min, max } = UPSTREAM_H2_OPTIONS[option];
  return { type: "string", arg, defaultText: String(upstreamH2Default(option)), help, details: `${min} to ${max}; ${past}` };
}

export const UPSTREAM_H2_FLAGS = {
  "upstream-h2-max-concurrent-streams": flag(
    "upstreamH2MaxConcurrentStreams",
    "N",
    "requests the agent sends at once on its HTTP/2 connection to the service",
    "never more than the service's SETTINGS_MAX_CONCURRENT_STREAMS. Requests past it wait their turn, in order (the edge's response timeout still runs).",
  ),
  "upstream-h2-max-header-list": flag(
    "upstreamH2MaxHeaderList",
    "B",
    "bytes a response's header list from the service may decode to, and its header block may take",
    "the agent's SETTINGS_MAX_HEADER_LIST_SIZE. A longer list resets the stream, a 502 for the visitor (an HPACK bomb); a longer block ends the connection.",
  ),
  "upstream-h2-stream-window": flag(
    "upstreamH2StreamWindow",
    "B",
    "response bytes the service may send on a request before the visitor took the ones before",
    "the agent's SETTINGS_INITIAL_WINDOW_SIZE, and what it holds per request for a visitor who does not read; the connection's window is every request's together. DATA past it resets the stream (`FLOW_CONTROL_ERROR`).",
  ),
  "upstream-h2-max-queued-control": flag(
    "upstreamH2MaxQueuedControl",
    "B",
    "bytes of frames the agent may queue (answers to PING, resets, window updates) while the service does not read",
    "past it the connection is cut, its requests a 502 or a cut answer.",
  ),
  "upstream-h2-idle-timeout": flag(
    "upstreamH2IdleTimeout",
    "S",
    "seconds the HTTP/2 connection to the service stays open with no request on it",
    "then it is closed (`GOAWAY NO_ERROR`) and the next request opens another. An idle connection does not keep the agent running.",
  ),
  "upstream-h2-settings-timeout": flag(
    "upstreamH2SettingsTimeout",
    "S",
    "seconds the service has to send its first HTTP/2 SETTINGS",
    'past it the requests waiting for the connection get a 502 ("does it speak HTTP/2?").',
  ),
} as const satisfies FlagTable;
