/**
 * SSH on the portal: the gateway's address and host keys for anyone to
 * check (GET /_burrow/api/ssh), a signed-in user's own keys
 * (/_burrow/api/me/ssh-keys), and `burrow keys add`'s way in
 * (POST /_burrow/api/device/ssh-keys), where a device logged in with
 * `burrow login` adds a key with its token: the key is then that token's
 * too, and revoking the token removes it (core/ssh-keys.ts). A user adding
 * their own is held to max_devices, counting tokens and keys, as a token
 * they make is.
 */
import * as v from "valibot";
import { json, parseBody, parseId } from "../api/http.ts";
import { sshKeyJson } from "../api/json.ts";
import { EntryList, ErrorBody, SshKeyJson, StatusBody } from "../api/responses.ts";
import { AppError } from "../core/errors.ts";
import type { PortalRoute } from "./context.ts";

/** What the portal says of the SSH gateway: its port, and its host keys for users to check. */
export interface SshGatewayFacts {
  port: number;
  hostKeys: { label: string; fingerprint: string; publicLine: string }[];
}

export const NewSshKeyBody = v.object({
  key: v.pipe(v.string("must be a string"), v.maxLength(8192, "is too long for a public key")),
  name: v.optional(v.pipe(v.string("must be a string"), v.trim(), v.minLength(1, "must not be empty"), v.maxLength(100, "must be at most 100 characters"))),
});

export const SshGatewayJson = v.strictObject({
  /** null: the server has no SSH gateway (--ssh-port off). */
  port: v.nullable(v.number()),
  host: v.string(),
  host_keys: v.array(v.strictObject({ type: v.string(), fingerprint: v.string(), known_hosts: v.string() })),
  /** An example, with this server's host and port. */
  command: v.nullable(v.string()),
});

/** "Bearer brw_..." of a request, or undefined. */
function bearer(req: Request): string | undefined {
  const m = /^Bearer[ \t]+(\S+)$/i.exec(req.headers.get("authorization")?.trim() ?? "");
  return m?.[1];
}

export function sshKeyRoutes(ssh: () => SshGatewayFacts | undefined, host: () => string): PortalRoute[] {
  return [
    {
      path: "/_burrow/api/ssh",
      public: true,
      methods: {
        async GET() {
          const facts = ssh();
          const name = host().replace(/:\d+$/, "");
          const at = facts && (facts.port === 22 ? name : `[${name}]:${facts.port}`);
          return json({
            port: facts?.port ?? null,
            host: name,
            host_keys: (facts?.hostKeys ?? []).map((k) => ({ type: k.label, fingerprint: k.fingerprint, known_hosts: `${at} ${k.publicLine}` })),
            command: facts ? `ssh -p ${facts.port} -R myapp:80:localhost:3000 ${name}` : null,
          });
        },
      },
      docs: {
        GET: {
          summary: "The SSH gateway: its port (null when off) and host keys, whose fingerprints a user checks at their first ssh, with a known_hosts line for each",
          security: [],
          responses: { 200: { description: "The gateway", schema: SshGatewayJson } },
        },
      },
    },
    {
      path: "/_burrow/api/me/ssh-keys",
      methods: {
        async GET(_req, { core, user }) {
          return json((await core.sshKeys.listForUser(user.id)).map(sshKeyJson));
        },
        async POST(req, { core, user, audit }) {
          const body = await parseBody(req, NewSshKeyBody);
          const row = await core.sshKeys.add(user, body.key, body.name, { withinLimit: true });
          audit.target = `ssh-key:${row.id}`;
          audit.details = { name: row.name, fingerprint: row.fingerprint };
          return json(sshKeyJson(row), 201);
        },
      },
      audit: { POST: "ssh-key.create" },
      docs: {
        GET: { summary: "The user's SSH keys, with which they open tunnels through the SSH gateway", responses: { 200: { description: "The keys", schema: EntryList(SshKeyJson) } } },
        POST: {
          summary: "Add an SSH public key (the line of a .pub file): a device of the user's, so `max_devices` counts it with the tokens",
          body: NewSshKeyBody,
          responses: {
            201: { description: "The key", schema: SshKeyJson },
            409: { description: "SSH_KEY_TAKEN: the key is registered already; TOO_MANY_DEVICES: `max_devices` tokens and keys already", schema: ErrorBody },
          },
        },
      },
    },
    {
      path: "/_burrow/api/me/ssh-keys/:id",
      methods: {
        async DELETE(_req, { core, user, audit, params }) {
          const id = parseId(params.id);
          audit.target = `ssh-key:${id}`;
          const row = await core.sshKeys.removeOwn(user.id, id);
          audit.details = { name: row.name, fingerprint: row.fingerprint };
          return json({ status: "deleted" });
        },
      },
      audit: { DELETE: "ssh-key.delete" },
      docs: {
        DELETE: {
          summary: "Remove one of the user's SSH keys: its SSH sessions close now",
          responses: { 200: { description: "Deleted", schema: StatusBody("deleted") }, 404: { description: "No such key of this user's", schema: ErrorBody } },
        },
      },
    },
    {
      path: "/_burrow/api/device/ssh-keys",
      public: true,
      methods: {
        async POST(req, { core, audit }) {
          const secret = bearer(req);
          // a token is 256 random bits, looked up by its first characters and compared in constant time
          const found = secret === undefined ? undefined : await core.tokens.identify(secret);
          if (!found || !found.token.enabled || !found.user.enabled) throw new AppError("UNAUTHORIZED", "this device's token is not valid: run burrow login again");
          audit.actor = { userId: found.user.id, username: found.user.username };
          const body = await parseBody(req, NewSshKeyBody);
          const row = await core.sshKeys.add(found.user, body.key, body.name, { withinLimit: true, addedByToken: found.token.id });
          audit.target = `ssh-key:${row.id}`;
          audit.details = { name: row.name, fingerprint: row.fingerprint, token_id: found.token.id };
          return json(sshKeyJson(row), 201);
        },
      },
      audit: { POST: "ssh-key.create" },
      docs: {
        POST: {
          summary: "`burrow keys add`: a logged-in device adds an SSH key with its token (`Authorization: Bearer brw_...`); revoking that token removes the key",
          body: NewSshKeyBody,
          security: [],
          responses: {
            201: { description: "The key", schema: SshKeyJson },
            401: { description: "No valid token of an enabled user", schema: ErrorBody },
            409: { description: "SSH_KEY_TAKEN, or TOO_MANY_DEVICES", schema: ErrorBody },
          },
        },
      },
    },
  ];
}
