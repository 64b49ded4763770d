/**
 * The admin panel's user page in Chromium (Debian's): an admin adds a
 * user's SSH key (then signing in with OpenSSH), sees its fingerprint, and
 * removes it after a confirmation, which closes the key's session.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { tunnelFetch } from "../harness/agent.ts";
import { startSshRig, sshSkipReason, type SshRig } from "../harness/ssh-client.ts";
import { waitUntil } from "../harness/wait.ts";
import { openBrowser, signIn, type TestBrowser } from "../panel/browser.ts";

const skip = sshSkipReason();
let rig: SshRig;
let browser: TestBrowser;
const web = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("from the panel's key") });

beforeAll(async () => {
  if (skip) return;
  rig = await startSshRig();
  browser = await openBrowser();
}, 60_000);
afterAll(async () => {
  await browser?.[Symbol.asyncDispose]();
  await rig?.close();
  web.stop(true);
});

describe.skipIf(skip !== undefined)("SSH keys on the admin panel's user page", () => {
  test("an admin adds a key, which then signs in, and removes it, which closes its session", async () => {
    const { page } = browser;
    const id = await rig.api.createUser("panel-key-user");
    await signIn(page, rig.server.adminUrl);
    await page.goto(`${rig.server.adminUrl}/users/${id}`);
    const card = page.getByRole("region", { name: "SSH keys" });
    await card.getByText("panel-key-user has no SSH key.").waitFor();
    const key = rig.keys.make("ecdsa", 256, "ops@desk");
    await card.getByLabel("Public key").fill(key.pub);
    await card.getByRole("button", { name: "Add SSH key" }).click();
    await card.locator('[data-ssh-key="ops@desk"]').waitFor();
    expect(await card.locator('[data-ssh-key="ops@desk"]').textContent()).toContain(key.fingerprint);

    const ssh = rig.ssh(["-N", "-R", `panelkey:80:localhost:${web.port}`], { key });
    await waitUntil(async () => (await tunnelFetch(rig.server.edgePort, "panelkey", "/")).status === 200, 15_000, "the tunnel of the panel's key");

    await card.getByRole("button", { name: "Remove SSH key ops@desk" }).click();
    await page.getByRole("button", { name: "Remove", exact: true }).click();
    await card.getByText("panel-key-user has no SSH key.").waitFor();
    expect(await ssh.proc.exited).toBe(255);
    expect(ssh.output.text()).toContain("KEY_REVOKED");
  }, 60_000);
});
