/**
 * Who may reach a tunnel, as flags of burrow http (all of them) and burrow
 * tcp (the IP rules): read into the HELLO's `access` settings, each checked
 * as burrow.yml's keys are (agent/settings/tunnel-options.ts). The secrets may come
 * from the environment instead of the command line, where other users of
 * the machine can read them: BURROW_BASIC_AUTH, BURROW_OIDC_CLIENT_SECRET.
 */
import type { FlagTable } from "../config/flags.ts";
import {
  ACCESS_LIST_MAX,
  compactAccess,
  oidcSettings,
  parseBasicAuth,
  parseCidr,
  parseEmailRule,
  parseHeaderLine,
  parseHeaderName,
  parseIssuer,
  tooManyEntries,
} from "../agent/settings/tunnel-options.ts";
import { UsageError } from "../usage-error.ts";
import type { HttpAccess, TcpAccess } from "../protocol/messages.ts";
import type { TunnelSpec } from "../agent/settings/tunnel-spec.ts";

/** "At most N in one handshake.": a list flag's bound, from the table the agent checks it with. */
const atMost = (key: string, what = "") => `At most ${ACCESS_LIST_MAX[key]}${what && ` ${what}`} in one handshake.`;

export const IP_FLAGS = {
  "allow-cidr": {
    type: "string",
    arg: "CIDR",
    multiple: true,
    help: "only visitors from these addresses, IPv4 or IPv6",
    details: `burrow tcp closes the others as they connect. ${atMost("allow_cidr")}`,
  },
  "deny-cidr": { type: "string", arg: "CIDR", multiple: true, help: "never visitors from these; deny wins", details: atMost("deny_cidr") },
} as const satisfies FlagTable;

/** A tunnel's own traffic policy (http, tcp and tls tunnels): docs/policy.md. */
export const POLICY_FLAG = {
  "policy-file": {
    type: "string",
    arg: "FILE",
    help: "a traffic policy the server runs on this tunnel's traffic (YAML or JSON, in ngrok's format)",
    details:
      "Checked before the agent connects (as `burrow policy check` checks it) and run by the server after the operator's own policies, which it cannot lift. burrow tcp and burrow tls run its `on_tcp_connect` rules; burrow http all its phases. At most 128 KiB.",
  },
  // ngrok's agent writes it so: a command line written for ngrok works unchanged
  "traffic-policy-file": { type: "string", arg: "FILE", help: "the same as --policy-file (ngrok's name for it)" },
} as const satisfies FlagTable;

export const HTTP_ACCESS_FLAGS = {
  "basic-auth": {
    type: "string",
    arg: "USER:PASS",
    multiple: true,
    env: true,
    help: "visitors sign in with this user and password",
    details: `${atMost("basic_auth", "users")} Not with \`--oidc-issuer\`: a tunnel takes one or the other.`,
  },
  ...IP_FLAGS,
  ...POLICY_FLAG,
  "request-header-add": {
    type: "string",
    arg: '"Name: value"',
    multiple: true,
    help: "set this header on requests to your service",
    details: atMost("request_header_add"),
  },
  "request-header-remove": {
    type: "string",
    arg: "Name",
    multiple: true,
    help: "remove this header from requests to your service",
    details: atMost("request_header_remove"),
  },
  "response-header-add": {
    type: "string",
    arg: '"Name: value"',
    multiple: true,
    help: "set this header on responses to visitors",
    details: atMost("response_header_add"),
  },
  "oidc-issuer": {
    type: "string",
    arg: "URL",
    help: "visitors sign in with this OpenID Connect provider (with --oidc-client-id and --oidc-client-secret); your service gets the visitor's email in X-Burrow-User-Email",
  },
  "oidc-client-id": { type: "string", arg: "ID", help: "the tunnel's client id at the provider" },
  "oidc-client-secret": { type: "string", arg: "S", env: true, help: "its client secret" },
  "oidc-allow-email": {
    type: "string",
    arg: "E",
    multiple: true,
    defaultText: "anyone the provider signs in",
    help: "only this address, or anyone @domain.com",
    details: atMost("allow_emails"),
  },
} as const satisfies FlagTable;

/** Each value of a repeatable flag, checked, the message led by the flag's name. */
function each<T>(values: Record<string, unknown>, flag: string, parse: (raw: string) => T): T[] {
  const given = (values[flag] as string[] | undefined) ?? [];
  const max = ACCESS_LIST_MAX[flag === "oidc-allow-email" ? "allow_emails" : flag.replaceAll("-", "_")];
  if (max !== undefined && given.length > max) throw new UsageError(`--${flag}: ${tooManyEntries(max, given.length)}`);
  return given.map((raw) => {
    try {
      return parse(raw);
    } catch (err) {
      if (err instanceof UsageError) throw new UsageError(`--${flag} ${err.message}`);
      throw err;
    }
  });
}

function one(values: Record<string, unknown>, flag: string, parse: (raw: string) => string): string | undefined {
  const raw = values[flag] as string | undefined;
  return raw === undefined ? undefined : each({ [flag]: [raw] }, flag, parse)[0];
}

/** Who may reach the tunnel, as the spec's options (agent/settings/tunnel-spec.ts): each flag's values checked, the message led by the flag. */
export function accessOptions(values: Record<string, unknown>, http: boolean): Partial<TunnelSpec> {
  const ip = { allowCidr: each(values, "allow-cidr", parseCidr), denyCidr: each(values, "deny-cidr", parseCidr) };
  if (!http) return ip;
  const oidc = oidcSettings(
    {
      issuer: one(values, "oidc-issuer", parseIssuer),
      clientId: values["oidc-client-id"] as string | undefined,
      clientSecret: values["oidc-client-secret"] as string | undefined,
      allowEmails: each(values, "oidc-allow-email", parseEmailRule),
    },
    { issuer: "--oidc-issuer", clientId: "--oidc-client-id", clientSecret: "--oidc-client-secret", allowEmails: "--oidc-allow-email" },
  );
  return {
    basicAuth: each(values, "basic-auth", parseBasicAuth),
    ...ip,
    requestHeaderAdd: each(values, "request-header-add", parseHeaderLine),
    requestHeaderRemove: each(values, "request-header-remove", parseHeaderName),
    responseHeaderAdd: each(values, "response-header-add", parseHeaderLine),
    oidc,
  };
}

/** The IP rules alone, as a tcp, tls or udp tunnel's HELLO carries them. */
export function tcpAccessFromFlags(values: Record<string, unknown>): TcpAccess | undefined {
  const o = accessOptions(values, false);
  return compactAccess({ allowCidrs: o.allowCidr, denyCidrs: o.denyCidr });
}

/** An http tunnel's access settings alone, as its HELLO carries them (what goes with what is the spec's). */
export function httpAccessFromFlags(values: Record<string, unknown>): HttpAccess | undefined {
  const o = accessOptions(values, true);
  return compactAccess({
    basicAuth: o.basicAuth,
    allowCidrs: o.allowCidr,
    denyCidrs: o.denyCidr,
    requestHeaderAdd: o.requestHeaderAdd,
    requestHeaderRemove: o.requestHeaderRemove,
    responseHeaderAdd: o.responseHeaderAdd,
    oidc: o.oidc,
  });
}

/** A tunnel's access settings in a few words for `burrow config check`, naming no password, secret or header value. */
export function describeAccess(access: HttpAccess | TcpAccess | undefined): string[] {
  if (!access) return [];
  const http = access as HttpAccess;
  const n = (list: unknown[] | undefined, one: string, many = `${one}s`) => (list?.length ? `${list.length} ${list.length === 1 ? one : many}` : "");
  return [
    http.basicAuth?.length ? `basic auth (${n(http.basicAuth, "user")})` : "",
    http.oidc ? `OIDC ${http.oidc.issuer}${http.oidc.allowEmails?.length ? ` for ${http.oidc.allowEmails.join(" ")}` : ""}` : "",
    access.allowCidrs?.length ? `allow ${access.allowCidrs.join(" ")}` : "",
    access.denyCidrs?.length ? `deny ${access.denyCidrs.join(" ")}` : "",
    http.requestHeaderAdd?.length || http.requestHeaderRemove?.length || http.responseHeaderAdd?.length ? "header rules" : "",
  ].filter(Boolean);
}
