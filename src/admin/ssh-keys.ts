/** /api/users/:id/ssh-keys and /api/ssh-keys/:id: users' SSH public keys, the SSH gateway's devices (core/ssh-keys.ts). */
import type { Route } from "./context.ts";
import { json, parseBody, parseId } from "../api/http.ts";
import { sshKeyJson } from "../api/json.ts";
import { EntryList, SshKeyJson, StatusBody } from "../api/responses.ts";
import { CreateSshKeyBody } from "./schemas.ts";

export const sshKeyRoutes: Route[] = [
  {
    path: "/api/users/:id/ssh-keys",
    methods: {
      async GET(req, { core }) {
        const user = await core.users.get(parseId(req.params.id));
        return json((await core.sshKeys.listForUser(user.id)).map(sshKeyJson));
      },
      async POST(req, { core, audit }) {
        const user = await core.users.get(parseId(req.params.id));
        audit.details = { user_id: user.id, username: user.username };
        const body = await parseBody(req, CreateSshKeyBody);
        const row = await core.sshKeys.add(user, body.key, body.name);
        audit.target = `ssh-key:${row.id}`;
        audit.details = { ...audit.details, name: row.name, fingerprint: row.fingerprint };
        return json(sshKeyJson(row), 201);
      },
    },
    audit: { POST: "ssh-key.create" },
    docs: {
      GET: { summary: "A user's SSH public keys, by id", responses: { 200: { description: "The keys", schema: EntryList(SshKeyJson) } } },
      POST: {
        summary: "Add an SSH public key (ed25519, ecdsa, or RSA of 2048 bits or more): with it the user opens tunnels through the SSH gateway",
        body: CreateSshKeyBody,
        responses: { 201: { description: "The key", schema: SshKeyJson } },
      },
    },
  },
  {
    path: "/api/ssh-keys/:id",
    methods: {
      async DELETE(req, { core, audit }) {
        const id = parseId(req.params.id);
        audit.target = `ssh-key:${id}`;
        const row = await core.sshKeys.remove(id);
        audit.details = { user_id: row.userId, name: row.name, fingerprint: row.fingerprint };
        return json({ status: "deleted" });
      },
    },
    audit: { DELETE: "ssh-key.delete" },
    docs: {
      DELETE: {
        summary: "Remove an SSH key: the SSH sessions it opened close now (KEY_REVOKED)",
        responses: { 200: { description: "Deleted", schema: StatusBody("deleted") } },
      },
    },
  },
];
