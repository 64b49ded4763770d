/** Request bodies and queries of the admin API, built from core's field rules. */
import * as v from "valibot";
import * as f from "../core/fields.ts";

/** A field that must be present, then must pass `schema`. */
const required = <S extends v.GenericSchema>(schema: S) =>
  v.pipe(
    v.unknown(),
    v.check((x) => x !== undefined, "is required"),
    schema,
  );

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
  };
}

/** Drops undefined entries so "only included fields change". */
export function definedOnly<T extends Record<string, unknown>>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, x]) => x !== undefined)) as Partial<T>;
}
