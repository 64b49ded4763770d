/**
 * Users' SSH public keys through the admin API of a real server, with keys
 * made by the real ssh-keygen: added (ed25519, ecdsa, RSA of 2048 bits or
 * more; the fingerprint as ssh-keygen prints it; only the public half
 * kept), listed, refused with a reason (DSA, short RSA, a private key,
 * garbage, a key another user has), removed, and each change audited.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { KeyDir, sshSkipReason } from "../harness/ssh-client.ts";

const skip = sshSkipReason();
let server: TestServer;
let api: AdminClient;
const keys = new KeyDir();

beforeAll(async () => {
  if (skip) return;
  server = await startServer();
  api = await signedIn(server);
}, 30_000);
afterAll(async () => {
  await server?.stop();
  keys[Symbol.dispose]();
});

const KEY_FIELDS = ["created_at", "fingerprint", "id", "key", "last_used", "name", "type", "user_id"];

async function latestAudit(action: string) {
  const res = await api.get(`/api/audit?action=${action}&limit=1`);
  return res.body[0];
}

describe.skipIf(skip !== undefined)("SSH keys through the admin API", () => {
  for (const [type, bits, expected] of [
    ["ed25519", undefined, "ssh-ed25519"],
    ["ecdsa", 256, "ecdsa-sha2-nistp256"],
    ["ecdsa", 384, "ecdsa-sha2-nistp384"],
    ["ecdsa", 521, "ecdsa-sha2-nistp521"],
    ["rsa", 2048, "ssh-rsa"],
  ] as const) {
    test(`an ${type}${bits ? ` ${bits}` : ""} key is added with ssh-keygen's fingerprint, named by its comment, and listed`, async () => {
      const userId = await api.createUser(`keys-${type}-${bits ?? 0}`);
      const key = keys.make(type, bits, `me@laptop-${type}`);
      const res = await api.post(`/api/users/${userId}/ssh-keys`, { key: key.pub });
      expect(res.status).toBe(201);
      expect(Object.keys(res.body).sort()).toEqual(KEY_FIELDS);
      expect(res.body).toMatchObject({ user_id: userId, name: `me@laptop-${type}`, type: expected, fingerprint: key.fingerprint, last_used: null });
      // the comment is not kept with the key
      expect(res.body.key).toBe(key.pub.split(" ").slice(0, 2).join(" "));
      const listed = await api.get(`/api/users/${userId}/ssh-keys`);
      expect(listed.status).toBe(200);
      expect(listed.body).toEqual([res.body]);
    });
  }

  test("a name given is the key's name", async () => {
    const userId = await api.createUser("keys-named");
    const res = await api.post(`/api/users/${userId}/ssh-keys`, { key: keys.make().pub, name: "  build server " });
    expect(res.status).toBe(201);
    expect(res.body.name).toBe("build server");
  });

  test("refused with a reason: DSA, RSA under 2048 bits, garbage, a private key (never stored or echoed)", async () => {
    const userId = await api.createUser("keys-refused");
    const dsa = await api.post(`/api/users/${userId}/ssh-keys`, { key: keys.make("dsa").pub });
    expect(dsa.status).toBe(400);
    expect(dsa.body.error).toContain("DSA keys are refused");
    const short = await api.post(`/api/users/${userId}/ssh-keys`, { key: keys.make("rsa", 1024).pub });
    expect(short.status).toBe(400);
    expect(short.body.error).toContain("at least 2048 bits; this one has 1024");
    const garbage = await api.post(`/api/users/${userId}/ssh-keys`, { key: "ssh-ed25519 not-base64 at all" });
    expect(garbage.status).toBe(400);
    expect(garbage.body.error).toContain("not an OpenSSH public key");
    const privateKey = readFileSync(keys.make().file, "utf8");
    const leaked = await api.post(`/api/users/${userId}/ssh-keys`, { key: privateKey });
    expect(leaked.status).toBe(400);
    expect(leaked.body.error).toContain("this is a private key");
    expect(JSON.stringify(leaked.body)).not.toContain(privateKey.split("\n")[1]!);
    const missing = await api.post(`/api/users/${userId}/ssh-keys`, {});
    expect(missing.status).toBe(400);
    expect((await api.get(`/api/users/${userId}/ssh-keys`)).body).toEqual([]);
  });

  test("a key belongs to one user: another user adding it gets 409 SSH_KEY_TAKEN, which does not say whose", async () => {
    const alice = await api.createUser("keys-alice");
    const bob = await api.createUser("keys-bob");
    const key = keys.make();
    expect((await api.post(`/api/users/${alice}/ssh-keys`, { key: key.pub })).status).toBe(201);
    const again = await api.post(`/api/users/${bob}/ssh-keys`, { key: key.pub });
    expect(again.status).toBe(409);
    expect(again.body.error).toContain("registered already");
    expect(again.body.error).not.toContain("keys-alice");
    const twice = await api.post(`/api/users/${alice}/ssh-keys`, { key: key.pub });
    expect(twice.status).toBe(409);
  });

  test("an unknown user is 404; a key removed is gone (404 the second time); each change is audited", async () => {
    expect((await api.post("/api/users/99999/ssh-keys", { key: keys.make().pub })).status).toBe(404);
    expect((await api.get("/api/users/99999/ssh-keys")).status).toBe(404);
    const userId = await api.createUser("keys-removed");
    const key = keys.make();
    const added = await api.post(`/api/users/${userId}/ssh-keys`, { key: key.pub, name: "laptop" });
    expect(added.status).toBe(201);
    const created = await latestAudit("ssh-key.create");
    expect(created).toMatchObject({ action: "ssh-key.create", target: `ssh-key:${added.body.id}`, outcome: "ok" });
    expect(JSON.stringify(created.details)).toContain(key.fingerprint);
    const removed = await api.delete(`/api/ssh-keys/${added.body.id}`);
    expect(removed.status).toBe(200);
    expect(removed.body).toEqual({ status: "deleted" });
    expect(await latestAudit("ssh-key.delete")).toMatchObject({ action: "ssh-key.delete", target: `ssh-key:${added.body.id}`, outcome: "ok" });
    expect((await api.get(`/api/users/${userId}/ssh-keys`)).body).toEqual([]);
    expect((await api.delete(`/api/ssh-keys/${added.body.id}`)).status).toBe(404);
    // removed, the key can be added again (to anyone)
    expect((await api.post(`/api/users/${userId}/ssh-keys`, { key: key.pub })).status).toBe(201);
  });

  test("deleting a user deletes their keys: the key is free for another user", async () => {
    const userId = await api.createUser("keys-deleted-user");
    const key = keys.make();
    expect((await api.post(`/api/users/${userId}/ssh-keys`, { key: key.pub })).status).toBe(201);
    expect((await api.delete(`/api/users/${userId}`)).status).toBe(200);
    const other = await api.createUser("keys-next-owner");
    expect((await api.post(`/api/users/${other}/ssh-keys`, { key: key.pub })).status).toBe(201);
  });
});
