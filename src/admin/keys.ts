/**
 * /api/keys and /api/keys/:id: admin API keys for scripts (core/admin-keys.ts).
 * A key is made only from a signed-in session, never with another key: a
 * key that leaked cannot mint others that would outlive its revocation.
 * Listing and revoking work with either.
 */
import type { AdminKey } from "../core/admin-keys.ts";
import type { Clock } from "../core/clock.ts";
import { AppError } from "../core/errors.ts";
import type { Route } from "./context.ts";
import { json, parseBody, parseId } from "../api/http.ts";
import { AdminKeyJson, EntryList, NewAdminKeyJson, StatusBody } from "../api/responses.ts";
import { CreateKeyBody } from "./schemas.ts";

export function keyStatus(k: AdminKey, clock: Clock): "active" | "expired" | "revoked" {
  if (k.revokedAt !== null) return "revoked";
  if (k.expiresAt !== null && Date.parse(k.expiresAt) <= clock.now().getTime()) return "expired";
  return "active";
}

export const adminKeyJson = (k: AdminKey, clock: Clock) => ({
  id: k.id,
  name: k.name,
  user_id: k.userId,
  username: k.username,
  status: keyStatus(k, clock),
  created_at: k.createdAt,
  expires_at: k.expiresAt,
  last_used: k.lastUsed,
  revoked_at: k.revokedAt,
});

export const keyRoutes: Route[] = [
  {
    path: "/api/keys",
    methods: {
      GET: async (_req, { core }) => json((await core.adminKeys.list()).map((k) => adminKeyJson(k, core.clock))),
      async POST(req, { core, admin, keyId, audit }) {
        if (keyId !== undefined) throw new AppError("FORBIDDEN", "API keys are made from a signed-in session, not with another key");
        const body = await parseBody(req, CreateKeyBody);
        const { secret, key } = await core.adminKeys.create(admin.id, body.name, body.expires_in_days);
        audit.target = `key:${key.id}`;
        audit.details = { name: key.name, expires_at: key.expiresAt };
        return json(
          {
            key: secret,
            key_id: key.id,
            name: key.name,
            created_at: key.createdAt,
            expires_at: key.expiresAt,
            message: "Store this key now: it is shown only once and cannot be retrieved later.",
          },
          201,
        );
      },
    },
    audit: { POST: "key.create" },
    docs: {
      GET: {
        summary: "List admin API keys (never their secrets)",
        responses: { 200: { description: "Every key, by id", schema: EntryList(AdminKeyJson) } },
      },
      POST: {
        summary: "Make an admin API key; its secret is in this answer only",
        description: "Only from a signed-in session (403 with a key). The key acts as the admin who made it, until it expires, is revoked, or that admin is disabled or demoted.",
        body: CreateKeyBody,
        responses: { 201: { description: "The key, with its secret", schema: NewAdminKeyJson } },
      },
    },
  },
  {
    path: "/api/keys/:id",
    methods: {
      async DELETE(req, { core, audit }) {
        const id = parseId(req.params.id);
        audit.target = `key:${id}`;
        const key = await core.adminKeys.revoke(id);
        audit.details = { name: key.name };
        return json({ status: "revoked" });
      },
    },
    audit: { DELETE: "key.revoke" },
    docs: {
      DELETE: {
        summary: "Revoke an admin API key (idempotent); requests with it get 401 from then on",
        responses: { 200: { description: "Revoked", schema: StatusBody("revoked") } },
      },
    },
  },
];
