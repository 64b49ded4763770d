/** Request bodies and queries of the admin API, built from core's field rules. */
import * as v from "valibot";
import { MAX_KEY_DAYS } from "../core/admin-keys.ts";
import { MAX_INVITATION_HOURS } from "../core/invitations.ts";
import { AUDIT_ACTIONS, MAX_AUDIT_LIMIT } from "../core/audit.ts";
import { POLICY_SCOPES } from "../core/traffic-policies.ts";
import * as f from "../validate/fields.ts";

const { required } = f;

const settings = {
  role: v.optional(f.role),
  enabled: v.optional(f.flag),
  max_tunnels: v.optional(f.limit),
  allowed_protocols: v.optional(f.allowedProtocols),
  traffic_limit: v.optional(f.limit),
  traffic_period: v.optional(f.trafficPeriod),
  max_devices: v.optional(f.limit),
  skip_warning: v.optional(f.flag),
  can_use_proxy: v.optional(f.flag),
  can_share: v.optional(f.flag),
  require_auth: v.optional(f.flag),
  allow_cidrs: v.optional(f.cidrList),
};

export const LoginBody = v.object({
  username: required(v.string("must be a string")),
  password: required(v.string("must be a string")),
});

export const CreateUserBody = v.object({
  username: required(f.username),
  password: required(f.password),
  ...settings,
});

export const UpdateUserBody = v.object({
  username: v.optional(f.username),
  password: v.optional(f.password),
  ...settings,
});

export const CreateTokenBody = v.object({
  device_name: required(
    v.pipe(
      v.string("must be a string"),
      v.trim(),
      v.minLength(1, "must not be empty"),
      v.maxLength(100, "must be at most 100 characters"),
    ),
  ),
});

/** An SSH public key for a user: its line of a .pub file, and a name (default: the key's comment). */
export const CreateSshKeyBody = v.object({
  key: required(v.pipe(v.string("must be a string"), v.maxLength(8192, "is too long for a public key"))),
  name: v.optional(v.pipe(v.string("must be a string"), v.trim(), v.minLength(1, "must not be empty"), v.maxLength(100, "must be at most 100 characters"))),
});

export const ReserveBody = v.object({
  subdomain: required(f.subdomain),
  user_id: required(
    v.pipe(
      v.number("must be an integer"),
      v.integer("must be an integer"),
      v.minValue(1, "must be a positive integer"),
      v.maxValue(Number.MAX_SAFE_INTEGER, "is too large"),
    ),
  ),
});

/** The user a hostname or reservation is for. */
const userId = required(
  v.pipe(
    v.number("must be an integer"),
    v.integer("must be an integer"),
    v.minValue(1, "must be a positive integer"),
    v.maxValue(Number.MAX_SAFE_INTEGER, "is too large"),
  ),
);

/** A hostname is checked by core (validate/hostname.ts): here only that it is a string of a sane length. */
export const CreateHostnameBody = v.object({
  hostname: required(v.pipe(v.string("must be a string"), v.maxLength(300, "must be at most 253 characters"))),
  user_id: userId,
  verified: v.optional(f.flag),
});

/** ?user_id=N */
export const HostnamesQuery = v.object({
  user_id: v.optional(
    v.pipe(
      v.string(),
      v.regex(/^[1-9][0-9]{0,15}$/, "must be a positive integer"),
      v.transform(Number),
      v.integer("must be a positive integer"),
      v.maxValue(Number.MAX_SAFE_INTEGER, "must be a positive integer"),
    ),
  ),
});

/** A traffic policy's name: a label for people (the audit log, the panel). */
const policyName = v.pipe(
  v.string("must be a string"),
  v.trim(),
  v.minLength(1, "must not be empty"),
  v.maxLength(100, "must be at most 100 characters"),
  v.regex(/^[^\x00-\x1f\x7f]+$/, "must be printable"),
);
/** A policy document: YAML or JSON text as written (its errors keep their lines), or a JSON object, kept as indented JSON. */
const policyDocument = v.pipe(
  v.union([v.string(), v.record(v.string(), v.unknown())], "must be the policy's YAML or JSON text, or an object"),
  v.transform((d) => (typeof d === "string" ? d : JSON.stringify(d, null, 2))),
);
const policyScope = v.picklist(POLICY_SCOPES, `must be ${POLICY_SCOPES.join(", ")}`);
const policyHostname = v.pipe(v.string("must be a string"), v.maxLength(300, "must be at most 253 characters"));

export const CreatePolicyBody = v.object({
  name: required(policyName),
  /** Default server: every tunnel. */
  scope: v.optional(policyScope, "server"),
  user_id: v.optional(v.pipe(v.number("must be an integer"), v.integer("must be an integer"), v.minValue(1, "must be a positive integer"), v.maxValue(Number.MAX_SAFE_INTEGER, "is too large"))),
  hostname: v.optional(policyHostname),
  policy: required(policyDocument),
});

export const UpdatePolicyBody = v.object({
  name: v.optional(policyName),
  scope: v.optional(policyScope),
  user_id: v.optional(v.pipe(v.number("must be an integer"), v.integer("must be an integer"), v.minValue(1, "must be a positive integer"), v.maxValue(Number.MAX_SAFE_INTEGER, "is too large"))),
  hostname: v.optional(policyHostname),
  policy: v.optional(policyDocument),
});

export const CreateKeyBody = v.object({
  name: required(
    v.pipe(
      v.string("must be a string"),
      v.trim(),
      v.minLength(1, "must not be empty"),
      v.maxLength(100, "must be at most 100 characters"),
    ),
  ),
  expires_in_days: v.optional(
    v.pipe(
      v.number(`must be an integer from 1 to ${MAX_KEY_DAYS}`),
      v.integer(`must be an integer from 1 to ${MAX_KEY_DAYS}`),
      v.minValue(1, `must be an integer from 1 to ${MAX_KEY_DAYS}`),
      v.maxValue(MAX_KEY_DAYS, `must be an integer from 1 to ${MAX_KEY_DAYS}`),
    ),
  ),
});

/** What a new user gets from an invitation: the fields the issue of invitations names, each optional (the user defaults otherwise). */
export const CreateInvitationBody = v.object({
  role: v.optional(f.role),
  max_tunnels: v.optional(f.limit),
  allowed_protocols: v.optional(f.allowedProtocols),
  traffic_limit: v.optional(f.limit),
  traffic_period: v.optional(f.trafficPeriod),
  max_devices: v.optional(f.limit),
  skip_warning: v.optional(f.flag),
  can_use_proxy: v.optional(f.flag),
  expires_in_hours: v.optional(
    v.pipe(
      v.number(`must be an integer from 1 to ${MAX_INVITATION_HOURS}`),
      v.integer(`must be an integer from 1 to ${MAX_INVITATION_HOURS}`),
      v.minValue(1, `must be an integer from 1 to ${MAX_INVITATION_HOURS}`),
      v.maxValue(MAX_INVITATION_HOURS, `must be an integer from 1 to ${MAX_INVITATION_HOURS}`),
    ),
  ),
  note: v.optional(v.pipe(v.string("must be a string"), v.trim(), v.maxLength(200, "must be at most 200 characters"))),
});

/** A whole number in a query string, from `min` to `max`. */
const queryInteger = (min: number, max: number, message: string) =>
  v.pipe(
    v.string(message),
    v.regex(/^[0-9]{1,16}$/, message),
    v.transform(Number),
    v.integer(message),
    v.minValue(min, message),
    v.maxValue(max, message),
  );

const queryId = queryInteger(1, Number.MAX_SAFE_INTEGER, "must be a positive integer");

export const MAX_TRAFFIC_DAYS = 365;

export const TrafficQuery = v.object({
  days: v.optional(queryInteger(1, MAX_TRAFFIC_DAYS, `must be an integer from 1 to ${MAX_TRAFFIC_DAYS}`)),
  user_id: v.optional(
    v.pipe(
      v.string(),
      v.regex(/^[1-9][0-9]{0,15}$/, "must be a positive integer"),
      v.transform(Number),
      v.integer("must be a positive integer"),
      v.maxValue(Number.MAX_SAFE_INTEGER, "must be a positive integer"),
    ),
  ),
});

export const AuditQuery = v.object({
  limit: v.optional(queryInteger(1, MAX_AUDIT_LIMIT, `must be an integer from 1 to ${MAX_AUDIT_LIMIT}`)),
  before_id: v.optional(queryId),
  user_id: v.optional(queryId),
  action: v.optional(v.picklist(AUDIT_ACTIONS, `must be one of ${AUDIT_ACTIONS.join(", ")}`)),
});

/** Settings as core names them, from the body's snake_case. */
export function userSettings(b: v.InferOutput<typeof UpdateUserBody>) {
  return {
    username: b.username,
    password: b.password,
    role: b.role,
    enabled: b.enabled,
    maxTunnels: b.max_tunnels,
    allowedProtocols: b.allowed_protocols,
    trafficLimit: b.traffic_limit,
    trafficPeriod: b.traffic_period,
    maxDevices: b.max_devices,
    skipWarning: b.skip_warning,
    canUseProxy: b.can_use_proxy,
    canShare: b.can_share,
    requireAuth: b.require_auth,
    allowCidrs: b.allow_cidrs,
  };
}

/** Drops undefined entries so "only included fields change". */
export function definedOnly<T extends Record<string, unknown>>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, x]) => x !== undefined)) as Partial<T>;
}
