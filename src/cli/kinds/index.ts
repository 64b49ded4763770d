/**
 * The tunnel kinds' commands, one line per kind: `burrow <kind>` exists for
 * every kind of the kind table (protocol/kinds.ts), and its type demands
 * one here for each.
 */
import type { TunnelKind } from "../../protocol/kinds.ts";
import { HTTP_COMMAND } from "./http.ts";
import { TCP_COMMAND } from "./tcp.ts";
import { TLS_COMMAND } from "./tls.ts";
import type { CliKind } from "./unit.ts";
import { UDP_COMMAND } from "./udp.ts";

export type { CliKind } from "./unit.ts";

export const CLI_KINDS = { http: HTTP_COMMAND, tcp: TCP_COMMAND, tls: TLS_COMMAND, udp: UDP_COMMAND } as const satisfies Record<TunnelKind, CliKind>;
