/**
 * `burrow tcp`: a tcp tunnel's command, its flags and its help.
 */
import type { FlagTable } from "../../config/flags.ts";
import { IP_FLAGS, POLICY_FLAG } from "../access-flags.ts";
import { AGENT_GROUP, COMMON, POOL_FLAGS, PRIVATE_FLAGS, PROXY_PROTOCOL_FLAG } from "../agent-flags.ts";
import type { CommandDoc } from "../usage.ts";
import type { CliKind } from "./unit.ts";

export const TCP_FLAGS = {
  ...COMMON,
  ...PRIVATE_FLAGS,
  "remote-port": {
    type: "string",
    arg: "N",
    defaultText: "any free one",
    help: "ask for this public port",
    details: "From the server's `--tcp-ports` range.",
  },
  ...PROXY_PROTOCOL_FLAG,
  ...POOL_FLAGS,
  ...IP_FLAGS,
  ...POLICY_FLAG,
} as const satisfies FlagTable;

const TCP_DOC: CommandDoc = {
  name: "tcp",
  usage: ["burrow tcp PORT|HOST:PORT [flags]"],
  about: "Exposes a local TCP service (e.g. 5432) at <server domain>:<port>.",
  flags: TCP_FLAGS,
  groups: [
    { title: "Flags:", flags: ["remote-port", "proxy-protocol", ...Object.keys(POOL_FLAGS), ...Object.keys(IP_FLAGS), ...Object.keys(POLICY_FLAG)] },
    { title: "Private, for named users only:", flags: Object.keys(PRIVATE_FLAGS) },
    AGENT_GROUP,
  ],
};

export const TCP_COMMAND: CliKind = { doc: TCP_DOC };
