/** Request bodies and queries of the portal's API, built from core's field rules. */
import * as v from "valibot";
import * as f from "../validate/fields.ts";

const { required } = f;

export const deviceName = v.pipe(v.string("must be a string"), v.trim(), v.minLength(1, "must not be empty"), v.maxLength(100, "must be at most 100 characters"));

export const LoginBody = v.object({
  username: required(v.pipe(v.string("must be a string"), v.maxLength(200, "must be at most 200 characters"))),
  password: required(v.pipe(v.string("must be a string"), v.maxLength(1024, "must be at most 1024 characters"))),
});

export const NewDeviceBody = v.object({ device_name: required(deviceName) });

export const PasswordBody = v.object({
  current_password: required(v.pipe(v.string("must be a string"), v.maxLength(1024, "must be at most 1024 characters"))),
  new_password: required(f.password),
});

const DAYS = "must be an integer from 1 to 365";

export const TrafficQuery = v.object({
  days: v.optional(v.pipe(v.string(), v.regex(/^[0-9]{1,16}$/, DAYS), v.transform(Number), v.minValue(1, DAYS), v.maxValue(365, DAYS))),
});

export const UserCodeBody = v.object({ user_code: required(v.pipe(v.string("must be a string"), v.maxLength(32, "must be at most 32 characters"))) });

export const DeviceCodeBody = v.object({ device_name: v.optional(deviceName) });

export const DeviceTokenBody = v.object({ device_code: required(v.pipe(v.string("must be a string"), v.maxLength(200, "must be at most 200 characters"))) });
