/**
 * The device login's endpoints (RFC 8628; the rules are core/device-login.ts):
 * the device's two (POST /_burrow/device/code, /_burrow/device/token), which
 * answer as the RFC says, and the signed-in user's three on the portal's API
 * (look a code up, approve, deny).
 */
import * as v from "valibot";
import { json, parseBody, parseQuery } from "../api/http.ts";
import { ErrorBody } from "../api/responses.ts";
import { showUserCode, type PendingDevice } from "../core/device-login.ts";
import { AppError } from "../core/errors.ts";
import { DEVICE_CODE_PATH, DEVICE_TOKEN_PATH } from "../protocol/wire.ts";
import type { PortalRoute } from "./context.ts";
import { DeviceCodeBody, DeviceTokenBody, UserCodeBody } from "./schemas.ts";

/** Where the user approves a code: the portal's page. */
export const VERIFY_PAGE = "/device";

const count = v.pipe(v.number(), v.integer(), v.minValue(1));

export const DeviceCodeJson = v.strictObject({
  device_code: v.string(),
  user_code: v.string(),
  verification_uri: v.string(),
  verification_uri_complete: v.string(),
  expires_in: count,
  interval: count,
});

export const DeviceTokenJson = v.strictObject({ token: v.string(), token_id: count, username: v.string() });

export const OAuthErrorBody = v.strictObject({
  error: v.picklist(["authorization_pending", "slow_down", "access_denied", "expired_token", "invalid_grant", "invalid_request"]),
  error_description: v.string(),
});

export const PendingDeviceJson = v.strictObject({ user_code: v.string(), device_name: v.string(), address: v.string(), created_at: v.string(), expires_at: v.string() });

const pendingJson = (d: PendingDevice) => ({ user_code: showUserCode(d.userCode), device_name: d.deviceName, address: d.address, created_at: d.createdAt, expires_at: d.expiresAt });

/** An OAuth error answer (RFC 6749 §5.2): 400 with the error's name. */
const oauthError = (error: string, description: string) => json({ error, error_description: description }, 400);

export const UserCodeQuery = v.object({ user_code: v.pipe(v.string(), v.maxLength(32, "must be at most 32 characters")) });

export const deviceRoutes: PortalRoute[] = [
  {
    path: DEVICE_CODE_PATH,
    public: true,
    methods: {
      async POST(req, { core, address, origin }) {
        const body = await parseBody(req, DeviceCodeBody);
        const codes = await core.deviceLogin.start(body.device_name ?? "a device", address);
        const shown = showUserCode(codes.userCode);
        return json({
          device_code: codes.deviceCode,
          user_code: shown,
          verification_uri: `${origin}${VERIFY_PAGE}`,
          verification_uri_complete: `${origin}${VERIFY_PAGE}?code=${shown}`,
          expires_in: codes.expiresInS,
          interval: codes.intervalS,
        });
      },
    },
    docs: {
      POST: {
        summary: "A device asks to log in (RFC 8628 §3.1): codes for `burrow login` to show and poll with",
        description: "The user opens `verification_uri`, signs in and approves `user_code`; meanwhile the device polls `POST /_burrow/device/token` every `interval` seconds. Valid `expires_in` seconds (10 minutes).",
        body: DeviceCodeBody,
        security: [],
        responses: {
          200: { description: "The codes", schema: DeviceCodeJson },
          429: { description: "Too many codes asked for from this address, or waiting in all (Retry-After)", schema: ErrorBody },
        },
      },
    },
  },
  {
    path: DEVICE_TOKEN_PATH,
    public: true,
    methods: {
      async POST(req, { core, audit }) {
        let deviceCode: string;
        try {
          deviceCode = (await parseBody(req, DeviceTokenBody)).device_code;
        } catch (err) {
          if (err instanceof AppError && err.code === "BAD_REQUEST") return oauthError("invalid_request", err.message);
          throw err;
        }
        const answer = await core.deviceLogin.poll(deviceCode);
        if (answer.kind === "wait") return oauthError(answer.error, answer.description);
        audit.actor = { userId: answer.user.id, username: answer.user.username };
        audit.target = `token:${answer.token.id}`;
        audit.details = { device_name: answer.token.deviceName };
        return json({ token: answer.secret, token_id: answer.token.id, username: answer.user.username });
      },
    },
    audit: { POST: "device.login" },
    docs: {
      POST: {
        summary: "The device polls for its token (RFC 8628 §3.4): the token once its user approved, given once",
        body: DeviceTokenBody,
        security: [],
        responses: {
          200: { description: "Approved: the device's token, shown this once", schema: DeviceTokenJson },
          400: {
            description: "Not (yet): `authorization_pending` (poll again after `interval`), `slow_down` (and add 5 s to it), `access_denied`, `expired_token`, `invalid_grant` (an unknown or used code), `invalid_request`",
            schema: OAuthErrorBody,
          },
        },
      },
    },
  },
  {
    path: "/_burrow/api/device",
    methods: {
      async GET(req, { core, user, address }) {
        const { user_code } = parseQuery(req, UserCodeQuery);
        return json(pendingJson(await core.deviceLogin.find(user_code, user, address)));
      },
    },
    docs: {
      GET: {
        summary: "The device waiting with a user code: its name and where it asked from, to show before approving",
        query: UserCodeQuery,
        responses: {
          200: { description: "The device", schema: PendingDeviceJson },
          404: { description: "No device waits with this code (wrong, used, or expired); wrong codes are throttled", schema: ErrorBody },
          429: { description: "Too many wrong codes from this user or address (Retry-After)", schema: ErrorBody },
        },
      },
    },
  },
  decisionRoute("approve", "device.approve", "Approve the device waiting with this code: its next poll gets a token of the signed-in user's", {
    409: { description: "TOO_MANY_DEVICES: the user holds `max_devices` tokens already", schema: ErrorBody },
  }),
  decisionRoute("deny", "device.deny", "Deny the device waiting with this code: its next poll gets `access_denied`"),
];

/** POST /_burrow/api/device/approve and /deny: the signed-in user decides on a code, audited with the device's name and address. */
function decisionRoute(decision: "approve" | "deny", action: "device.approve" | "device.deny", summary: string, more: Record<number, { description: string; schema: typeof ErrorBody }> = {}): PortalRoute {
  return {
    path: `/_burrow/api/device/${decision}`,
    methods: {
      async POST(req, { core, user, address, audit }) {
        const body = await parseBody(req, UserCodeBody);
        const device = await core.deviceLogin[decision](body.user_code, user, address);
        audit.details = { device_name: device.deviceName, from: device.address };
        return json(pendingJson(device));
      },
    },
    audit: { POST: action },
    docs: {
      POST: {
        summary,
        body: UserCodeBody,
        responses: {
          200: { description: decision === "approve" ? "Approved" : "Denied", schema: PendingDeviceJson },
          404: { description: "No device waits with this code", schema: ErrorBody },
          ...more,
          429: { description: "Too many wrong codes (Retry-After)", schema: ErrorBody },
        },
      },
    },
  };
}
