/**
 * `burrow tls`: a tls tunnel's command, its flags and its help.
 */
import type { FlagTable } from "../../config/flags.ts";
import { IP_FLAGS, POLICY_FLAG } from "../access-flags.ts";
import { AGENT_GROUP, COMMON, PROXY_PROTOCOL_FLAG, SUBDOMAIN_FLAG } from "../agent-flags.ts";
import type { CommandDoc } from "../usage.ts";
import type { CliKind } from "./unit.ts";

export const TLS_FLAGS = {
  ...COMMON,
  ...SUBDOMAIN_FLAG,
  ...PROXY_PROTOCOL_FLAG,
  ...IP_FLAGS,
  ...POLICY_FLAG,
} as const satisfies FlagTable;

const TLS_DOC: CommandDoc = {
  name: "tls",
  usage: ["burrow tls PORT|HOST:PORT [flags]"],
  about: `Exposes a local TLS service (e.g. 8443, localhost:8443) at
tls://<subdomain>.<server domain>:<port>: visitors' TLS connections for that
name reach it undecrypted, and it presents its own certificate (HTTP/2, gRPC
and client certificates work end to end). The server reads only the name.`,
  flags: TLS_FLAGS,
  groups: [{ title: "Flags:", flags: ["subdomain", "hostname", "proxy-protocol", ...Object.keys(IP_FLAGS), ...Object.keys(POLICY_FLAG)] }, AGENT_GROUP],
};

export const TLS_COMMAND: CliKind = { doc: TLS_DOC };
