/**
 * The rules for every value a person or a script can set, as valibot
 * schemas. The admin API builds its request bodies from these; the edge uses
 * the same subdomain rule in the handshake.
 */
import * as v from "valibot";
import { KIND_NAMES, type TunnelKind } from "../protocol/kinds.ts";
import { cidrProblem } from "./access.ts";

/** A field that must be present, then must pass `schema` (a body's fields: "x is required" rather than a type's words). */
export const required = <S extends v.GenericSchema>(schema: S) =>
  v.pipe(
    v.unknown(),
    v.check((x) => x !== undefined, "is required"),
    schema,
  );

export const ROLES = ["user", "admin"] as const;
export type Role = (typeof ROLES)[number];

/** What a user's allowed_protocols may name: the tunnel kinds. The default stays "http,tcp" (db schema). */
export const PROTOCOLS: readonly TunnelKind[] = KIND_NAMES;
export type Protocol = TunnelKind;
/** The kinds as an error message lists them: "http, tcp, tls, udp". */
export const PROTOCOL_LIST = KIND_NAMES.join(", ");

export const TRAFFIC_PERIODS = ["daily", "monthly", "quarterly"] as const;
export type TrafficPeriod = (typeof TRAFFIC_PERIODS)[number];

export const USERNAME_PATTERN = /^[A-Za-z0-9_.\-@]{1,64}$/;
export const SUBDOMAIN_PATTERN = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;
/** A private tunnel's name (reached as owner/name): the same shape as a subdomain, unique per owner. */
export const PRIVATE_NAME_PATTERN = SUBDOMAIN_PATTERN;

export const username = v.pipe(
  v.string("must be a string"),
  v.regex(USERNAME_PATTERN, "must be 1-64 characters from letters, digits and _ . - @"),
);

export const password = v.pipe(
  v.string("must be a string"),
  v.minLength(8, "must be at least 8 characters"),
  v.maxLength(1024, "must be at most 1024 characters"),
);

/** A DNS label, lowercased on input. */
export const subdomain = v.pipe(
  v.string("must be a string"),
  v.trim(),
  v.toLowerCase(),
  v.regex(SUBDOMAIN_PATTERN, "must be one DNS label: 1-63 characters from a-z, 0-9 and -, not starting or ending with -"),
);

/** A limit where 0 means unlimited. */
export const limit = v.pipe(
  v.number("must be an integer"),
  v.integer("must be an integer"),
  v.minValue(0, "must not be negative (0 means unlimited)"),
  v.maxValue(Number.MAX_SAFE_INTEGER, `must be at most ${Number.MAX_SAFE_INTEGER}`),
);

export const role = v.picklist(ROLES, `must be one of ${ROLES.join(", ")}`);
export const trafficPeriod = v.picklist(TRAFFIC_PERIODS, `must be one of ${TRAFFIC_PERIODS.join(", ")}`);
export const flag = v.boolean("must be true or false");

/**
 * "tcp, HTTP,http" -> "http,tcp": known names only, no duplicates, in a fixed
 * order so that equal sets compare equal as strings.
 */
export const allowedProtocols = v.pipe(
  v.string(`must be a comma-separated list of ${PROTOCOL_LIST}`),
  v.transform((s) => s.split(",").map((p) => p.trim().toLowerCase()).filter((p) => p !== "")),
  v.check((list) => list.length > 0, `must name at least one of ${PROTOCOL_LIST}`),
  v.check((list) => list.every((p) => (PROTOCOLS as readonly string[]).includes(p)), `must be a comma-separated list of ${PROTOCOL_LIST}`),
  v.transform((list) => PROTOCOLS.filter((p) => list.includes(p)).join(",")),
);

/** Most entries a user's allow_cidrs holds. */
export const MAX_USER_CIDRS = 64;

/**
 * ["10.0.0.0/8", " ::1 "] -> "10.0.0.0/8,::1": IPv4 or IPv6 CIDRs or single
 * addresses, trimmed, without duplicates, stored as one comma-separated text.
 * [] (or "") clears it: visitors from anywhere.
 */
export const cidrList = v.pipe(
  v.array(
    v.pipe(
      v.string("must be a string"),
      v.trim(),
      v.check((c) => cidrProblem(c) === undefined, "must be an IPv4 or IPv6 address or CIDR, such as 10.0.0.0/8 or 2001:db8::/32"),
    ),
    "must be a list of CIDRs, such as [\"10.0.0.0/8\"]",
  ),
  v.maxLength(MAX_USER_CIDRS, `must hold at most ${MAX_USER_CIDRS} entries`),
  v.transform((list) => [...new Set(list)].join(",")),
);

/** The stored text of allow_cidrs as a list. */
export function cidrs(stored: string): string[] {
  return stored === "" ? [] : stored.split(",");
}

export function protocolList(allowed: string): Protocol[] {
  return PROTOCOLS.filter((p) => allowed.split(",").includes(p));
}

/** Checks a value against a schema; on failure says which rule broke, with the field's name. */
export function describeIssues(issues: readonly v.BaseIssue<unknown>[]): string {
  const first = issues[0];
  if (!first) return "invalid input";
  const path = first.path?.map((p) => String(p.key)).join(".") ?? "";
  // v.object reports an absent key itself ("Invalid key: Expected ...") before any field rule runs
  if (path && first.type === "object" && first.path?.at(-1)?.origin === "key") return `${path} is required`;
  return path ? `${path} ${first.message}` : first.message;
}
