/**
 * /_burrow/api/me and under it: a signed-in user's own things only, each
 * looked up by the session's user, never by an id the request names (a
 * token id of someone else's is as unknown as one that does not exist).
 */
import * as v from "valibot";
import { json, parseBody, parseId, parseQuery } from "../api/http.ts";
import { activeTunnelJson, dayTrafficJson, domainJson, hostnameJson, tokenJson, userJson } from "../api/json.ts";
import { ActiveTunnelJson, DayTrafficJson, DomainJson, EntryList, ErrorBody, HostnameJson, StatusBody, TokenJson, UserJson } from "../api/responses.ts";
import { keyDevice } from "../core/device-ids.ts";
import { AppError } from "../core/errors.ts";
import type { ActiveTunnel } from "../core/live.ts";
import { checkPassword } from "../core/login.ts";
import { PRIVATE_KINDS } from "../protocol/kinds.ts";
import type { PortalRoute } from "./context.ts";
import { NewDeviceBody, PasswordBody, TrafficQuery } from "./schemas.ts";

const DEFAULT_DAYS = 30;

export const MeJson = v.strictObject({
  user: v.strictObject({ ...UserJson.entries, has_password: v.boolean() }),
  traffic_used: v.pipe(v.number(), v.integer(), v.minValue(0)),
  devices: v.pipe(v.number(), v.integer(), v.minValue(0)),
});

export const NewDeviceJson = v.strictObject({ token: v.string(), token_id: v.number(), device_name: v.string(), command: v.string(), message: v.string() });

export const MyTunnelJson = v.strictObject({ ...ActiveTunnelJson.entries, url: v.string(), device_name: v.nullable(v.string()) });

export const SharedTunnelJson = v.strictObject({
  target: v.string(),
  protocol: v.picklist(PRIVATE_KINDS),
  /** Its owner's agent is connected now (else `burrow connect` waits for it). */
  online: v.boolean(),
  command: v.string(),
});

/** Where a live tunnel is reached, as the edge says it (given by the server once the edge listens). */
export type AddressOf = (t: ActiveTunnel) => string;

export function meRoutes(addressOf: AddressOf): PortalRoute[] {
  return [
    {
      path: "/_burrow/api/me",
      methods: {
        async GET(_req, { core, user }) {
          const tokens = await core.tokens.listForUser(user.id);
          const keys = await core.sshKeys.listForUser(user.id);
          return json({
            user: { ...userJson(user), has_password: user.passwordHash !== "" },
            traffic_used: await core.traffic.usedInPeriod(user),
            // a device is a token or an SSH key, as max_devices counts them
            devices: tokens.filter((t) => t.enabled).length + keys.length,
          });
        },
      },
      docs: { GET: { summary: "The signed-in user, with their limits, traffic used this period and devices", responses: { 200: { description: "The user", schema: MeJson } } } },
    },
    {
      path: "/_burrow/api/me/tokens",
      methods: {
        async GET(_req, { core, user }) {
          return json((await core.tokens.listForUser(user.id)).map(tokenJson));
        },
        async POST(req, { core, user, audit, origin }) {
          const body = await parseBody(req, NewDeviceBody);
          const { secret, row } = await core.tokens.generateWithinLimit(user, body.device_name);
          audit.target = `token:${row.id}`;
          audit.details = { device_name: row.deviceName };
          return json(
            {
              token: secret,
              token_id: row.id,
              device_name: row.deviceName,
              command: `burrow login --server ${origin} --token ${secret}`,
              message: "Run this on the device now: the token is shown only once and cannot be retrieved later.",
            },
            201,
          );
        },
      },
      audit: { POST: "token.create" },
      docs: {
        GET: { summary: "The user's devices (tokens), revoked ones included; never their secrets", responses: { 200: { description: "The tokens", schema: EntryList(TokenJson) } } },
        POST: {
          summary: "Add a device: a token whose secret (and the `burrow login` line with it) is in this answer only; `max_devices` counts the enabled ones",
          body: NewDeviceBody,
          responses: {
            201: { description: "The token, with its secret", schema: NewDeviceJson },
            409: { description: "TOO_MANY_DEVICES: the user holds `max_devices` enabled tokens already", schema: ErrorBody },
          },
        },
      },
    },
    {
      path: "/_burrow/api/me/tokens/:id",
      methods: {
        async DELETE(_req, { core, user, audit, params }) {
          const id = parseId(params.id);
          audit.target = `token:${id}`;
          const row = await core.tokens.revokeOwn(user.id, id);
          audit.details = { device_name: row.deviceName };
          return json({ status: "revoked" });
        },
      },
      audit: { DELETE: "token.revoke" },
      docs: {
        DELETE: {
          summary: "Revoke one of the user's devices (idempotent): its tunnels close now",
          responses: { 200: { description: "Revoked", schema: StatusBody("revoked") }, 404: { description: "No such token of this user's", schema: ErrorBody } },
        },
      },
    },
    {
      path: "/_burrow/api/me/tunnels",
      methods: {
        async GET(_req, { core, user }) {
          const mine = (await core.live.list()).filter((t) => t.userId === user.id).sort((a, b) => a.connectedAt.getTime() - b.connectedAt.getTime());
          const devices = new Map<number, string>((await core.tokens.listForUser(user.id)).map((t) => [t.id, t.deviceName]));
          // a tunnel an SSH key opened names the key (its device id: core/device-ids.ts)
          for (const k of await core.sshKeys.listForUser(user.id)) devices.set(keyDevice(k.id), `SSH key ${k.name}`);
          return json(mine.map((t) => ({ ...activeTunnelJson(t), url: addressOf(t), device_name: devices.get(t.tokenId) ?? null })));
        },
      },
      docs: { GET: { summary: "The user's live tunnels, oldest first, with their public address and device", responses: { 200: { description: "The tunnels", schema: EntryList(MyTunnelJson) } } } },
    },
    {
      path: "/_burrow/api/me/shared",
      methods: {
        async GET(_req, { core, user }) {
          const shared = await core.privateShares.sharedWith(user.id);
          const online = new Set((await core.live.list()).flatMap((t) => (t.private ? [t.private.target] : [])));
          return json(shared.map((s) => ({ ...s, online: online.has(s.target), command: `burrow connect ${s.target}` })));
        },
      },
      docs: {
        GET: {
          summary: "The private tunnels others share with the user (what `burrow connect` reaches), by owner and name, and whether each is online now",
          responses: { 200: { description: "The shared tunnels", schema: EntryList(SharedTunnelJson) } },
        },
      },
    },
    {
      path: "/_burrow/api/me/traffic",
      methods: {
        async GET(req, { core, user }) {
          const query = parseQuery(req, TrafficQuery);
          return json((await core.traffic.perDay(user.id, query.days ?? DEFAULT_DAYS)).map(dayTrafficJson));
        },
      },
      docs: {
        GET: {
          summary: "The user's traffic per UTC day over the last `days` days (default 30), oldest first, zero-filled",
          query: TrafficQuery,
          responses: { 200: { description: "One record a day", schema: EntryList(DayTrafficJson) } },
        },
      },
    },
    {
      path: "/_burrow/api/me/domains",
      methods: {
        GET: async (_req, { core, user }) => json((await core.domains.listForUser(user.id)).map(domainJson)),
      },
      docs: { GET: { summary: "The user's reserved subdomains", responses: { 200: { description: "The subdomains", schema: EntryList(DomainJson) } } } },
    },
    {
      path: "/_burrow/api/me/hostnames",
      methods: {
        GET: async (_req, { core, user }) => json((await core.hostnames.list(user.id)).map(hostnameJson)),
      },
      docs: { GET: { summary: "The user's custom hostnames, with the TXT record that verifies each", responses: { 200: { description: "The hostnames", schema: EntryList(HostnameJson) } } } },
    },
    {
      path: "/_burrow/api/me/password",
      methods: {
        async PUT(req, { core, user, address, sessionKey }) {
          const body = await parseBody(req, PasswordBody);
          // the login throttle: a stolen session cannot guess the password faster than a login could
          await checkPassword(core.users, core.loginThrottle, address, user.username, body.current_password).catch((err) => {
            if (err instanceof AppError && err.code === "UNAUTHORIZED") {
              throw new AppError("FORBIDDEN", user.passwordHash === "" ? "this account signs in with the company's sign-in and has no password" : "the current password is wrong");
            }
            throw err;
          });
          // every other session of the user's, portal and admin API, ends: only this browser stays signed in
          await core.users.update(user.id, { password: body.new_password }, { keepSession: sessionKey });
          return json({ status: "changed" });
        },
      },
      audit: { PUT: "portal.password" },
      docs: {
        PUT: {
          summary: "Change the user's password; every other session of theirs (portal and admin API) ends, their devices stay",
          body: PasswordBody,
          responses: {
            200: { description: "Changed", schema: StatusBody("changed") },
            403: { description: "The current password is wrong (or the user has none: company sign-in)", schema: ErrorBody },
            429: { description: "Too many wrong passwords (the login throttle)", schema: ErrorBody },
          },
        },
      },
    },
  ];
}
