/**
 * `burrow udp`: a udp tunnel's command, its flags and its help; its
 * local service may also be named by --local-host and a port.
 */
import { parseTarget } from "../../agent/settings/tunnel-options.ts";
import type { FlagTable } from "../../config/flags.ts";
import { UsageError } from "../../usage-error.ts";
import { IP_FLAGS } from "../access-flags.ts";
import { AGENT_GROUP, COMMON, PRIVATE_FLAGS } from "../agent-flags.ts";
import type { CommandDoc } from "../usage.ts";
import type { CliKind } from "./unit.ts";

export const UDP_FLAGS = {
  ...COMMON,
  "remote-port": {
    type: "string",
    arg: "N",
    defaultText: "any free one",
    help: "ask for this public UDP port",
    details: "From the server's `--udp-ports` range, a port space apart from TCP's.",
  },
  "local-host": {
    type: "string",
    arg: "H",
    defaultText: "localhost",
    help: "the local service's host (the same as giving HOST:PORT)",
  },
  ...IP_FLAGS,
  ...PRIVATE_FLAGS,
} as const satisfies FlagTable;

const UDP_DOC: CommandDoc = {
  name: "udp",
  usage: ["burrow udp PORT|HOST:PORT [flags]"],
  about: `Exposes a local UDP service (e.g. 53, 51820) at udp://<server domain>:<port>.
Each visitor address and port is a flow with a UDP socket of its own here, so
the service's replies go back to the visitor that asked. Datagrams travel
whole; like UDP itself, some may be lost, never reordered by burrow.`,
  flags: UDP_FLAGS,
  groups: [{ title: "Flags:", flags: ["remote-port", "local-host", ...Object.keys(IP_FLAGS)] }, { title: "Private, for named users only:", flags: Object.keys(PRIVATE_FLAGS) }, AGENT_GROUP],
};

export const UDP_COMMAND: CliKind = {
  doc: UDP_DOC,
  target(positional, values) {
    const localHost = values["local-host"] as string | undefined;
    if (localHost !== undefined && positional?.includes(":")) throw new UsageError("give the local host either as HOST:PORT or as --local-host, not both");
    return parseTarget(localHost === undefined || positional === undefined ? positional : `${localHost.includes(":") ? `[${localHost}]` : localHost}:${positional}`, false);
  },
};
