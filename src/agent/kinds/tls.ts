/**
 * A tls tunnel on the agent's side: a "tls" stream is a visitor's TLS
 * connection, hello first, undecrypted, which goes to the service as it
 * came, exactly as a tcp connection does (a PROXY protocol header first
 * when asked); its request from the spec: its names and IP rules.
 */
import type { TcpAccess } from "../../protocol/messages.ts";
import { compactAccess } from "../settings/tunnel-options.ts";
import { serveConnection } from "./tcp.ts";
import type { AgentKind } from "./unit.ts";

export const TLS_AGENT: AgentKind = {
  urlTarget: false,
  serve: serveConnection,
  tunnel(_spec, { target, ip, names }) {
    const access = compactAccess<TcpAccess>(ip);
    return { request: { protocol: "tls", ...names, ...(access ? { access } : {}) }, target, inspect: false };
  },
};
