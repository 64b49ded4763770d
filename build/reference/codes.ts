/**
 * docs/reference/codes.md: every code an agent, a visitor's tunnel or an
 * admin can meet, a section per family, each from the table where its codes
 * are defined (meaning and advice beside each code). What the agent does on
 * a refusal comes from its own sets (agent/client.ts), not from words here.
 */
import { AGENT_REFUSALS } from "../../src/agent/access.ts";
import { FATAL_CODES, WAIT_AND_RETRY } from "../../src/agent/client.ts";
import { INSPECTOR_ERRORS } from "../../src/agent/inspector/errors.ts";
import { ACME_ERRORS } from "../../src/acme/errors.ts";
import { ACCESS_REFUSALS, REQUEST_ERRORS, SERVER_FAULTS, TUNNEL_REFUSALS } from "../../src/core/errors.ts";
import { WIRE_ERRORS } from "../../src/protocol/wire.ts";
import { code, generatedNotice, page, table } from "./markdown.ts";

interface CodeEntry {
  status?: number;
  stream?: boolean;
  meaning: string;
  advice: string;
}

interface Family {
  heading: string;
  /** Where the table is, for whoever changes a code. */
  source: string;
  about: string;
  codes: Readonly<Record<string, CodeEntry>>;
  /** Whether the agent can be told it (its reaction gets a column). */
  agent?: boolean;
}

const FAMILIES: readonly Family[] = [
  {
    heading: "Tunnel refusals",
    source: "src/core/errors.ts `TUNNEL_REFUSALS`",
    about:
      "An agent's handshake is refused with one of these (an ERROR frame: code, message, and `retry_after` for `RATE_LIMITED`), checked in this order after the handshake throttle; with several tunnels (`burrow start`) a refusal of one tunnel leaves the others running. `TRAFFIC_EXCEEDED` also closes live tunnels; an admin change that narrows what a user may do reaches what is live within 5 s, on every node, closing what it no longer allows with the code below that its handshake would now get ([what is live after an admin change](../admin-api.md#what-an-admin-change-does-to-what-is-live)).",
    codes: TUNNEL_REFUSALS,
    agent: true,
  },
  {
    heading: "Access-rule refusals",
    source: "src/core/errors.ts `ACCESS_REFUSALS`",
    about:
      "A tunnel whose access settings (`--basic-auth`, `--allow-cidr`, `--oidc-issuer`, ...) are malformed or not allowed is refused at the handshake with one of these, checked after `TRAFFIC_EXCEEDED` and before the subdomain's codes. Messages say what is wrong and never repeat a password, a client secret or a header's value. A HELLO whose `access` does not even fit the schema is a `PROTOCOL_ERROR` naming the field, not its value.",
    codes: ACCESS_REFUSALS,
    agent: true,
  },
  {
    heading: "Connection and stream codes",
    source: "src/protocol/wire.ts `WIRE_ERRORS`",
    about: "The protocol's own codes: in an ERROR frame, which ends the whole connection, or in an RST frame, which ends one stream (a visitor's request or connection).",
    codes: WIRE_ERRORS,
    agent: true,
  },
  {
    heading: "Server faults",
    source: "src/core/errors.ts `SERVER_FAULTS`",
    about: "When the fault is the server's: answered by the admin API (`{\"error\": message}` with the status) and by the agents' handshake alike.",
    codes: SERVER_FAULTS,
    agent: true,
  },
  {
    heading: "The agent's own refusals",
    source: "src/agent/access.ts `AGENT_REFUSALS`",
    about: "Refusals the agent makes itself, of a session the server granted; printed as the server's are (`burrow: refused by the server: CODE: message`).",
    codes: AGENT_REFUSALS,
    agent: true,
  },
  {
    heading: "Admin API errors",
    source: "src/core/errors.ts `REQUEST_ERRORS`",
    about:
      "The admin API answers an error as `{\"error\": message}` with the code's status; the code itself is in the audit log's entry for a write (`GET /api/audit`). Unknown body fields are ignored; a non-integer `:id` is 400. See also [Server faults](#server-faults), and [the admin API](api.md) for which route answers which.",
    codes: REQUEST_ERRORS,
  },
  {
    heading: "Request inspector errors",
    source: "src/agent/inspector/errors.ts `INSPECTOR_ERRORS`",
    about: "The agent's request inspector answers its API's errors as the admin API does, `{\"error\": message}`, with the code beside it (`\"code\"`) for scripts.",
    codes: INSPECTOR_ERRORS,
  },
  {
    heading: "Certificate failures (ACME)",
    source: "src/acme/errors.ts `ACME_ERRORS`",
    about:
      "A certificate's last failure, as `GET /api/certificates` reports it (`last_error`: code, message, when, and `retry_after` when the CA sent one) and the server's log prints it. Failures never stop the server; a failed attempt is retried from `--acme-retry-min`, doubling up to an hour (or later when the CA says Retry-After).",
    codes: ACME_ERRORS,
  },
];

/** What the agent does when it is told `name`, from the sets it decides with. */
function agentReaction(name: string, entry: CodeEntry): string {
  if (entry.stream) return "ends that stream only";
  if (FATAL_CODES.has(name)) return "exits 1";
  if (WAIT_AND_RETRY.has(name)) return "waits as told (`retry_after`, at most an hour), then tries again";
  return "tries again (exits 1 when it is the answer to its first handshake)";
}

function familySection(f: Family): string {
  const withStatus = Object.values(f.codes).some((c) => c.status !== undefined);
  const head = ["code", ...(withStatus ? ["status"] : []), "meaning", ...(f.agent ? ["the agent"] : []), "what to do"];
  const rows = Object.entries(f.codes).map(([name, c]) => [
    code(name),
    ...(withStatus ? [String(c.status)] : []),
    c.meaning,
    ...(f.agent ? [agentReaction(name, c)] : []),
    c.advice,
  ]);
  return page([`## ${f.heading}`, `${f.about} (Table: ${f.source}.)`, table(head, rows)]);
}

export function codesReference(): string {
  return page([
    generatedNotice("the code tables in `src/` (`build/reference/codes.ts`)"),
    "# Codes",
    "Every code an agent, a tunnel's visitor, an admin or a script can meet, a family to a table, each with what it means and what to do. Codes are stable: scripts may match on them. **status** is the HTTP status the code has wherever it is answered over HTTP; a handshake refusal carries only the code. **the agent** is what `burrow http`, `tcp` and `start` do when told it.",
    ...FAMILIES.map(familySection),
  ]);
}
