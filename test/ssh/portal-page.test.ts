/**
 * The portal's devices page in Chromium (Debian's) with the SSH gateway
 * on: the gateway's command and host key fingerprints shown, a key pasted
 * and added (then signing in with OpenSSH), a private key refused with the
 * server's words, a key removed after a confirmation.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { tunnelFetch } from "../harness/agent.ts";
import { startSshRig, sshSkipReason, type SshRig } from "../harness/ssh-client.ts";
import { waitUntil } from "../harness/wait.ts";
import { openBrowser, type TestBrowser } from "../panel/browser.ts";

const skip = sshSkipReason();
let rig: SshRig;
let browser: TestBrowser;
const web = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("from the page's key") });

beforeAll(async () => {
  if (skip) return;
  rig = await startSshRig();
  await rig.api.createUser("paige");
  browser = await openBrowser();
}, 60_000);
afterAll(async () => {
  await browser?.[Symbol.asyncDispose]();
  await rig?.close();
  web.stop(true);
});

describe.skipIf(skip !== undefined)("SSH keys on the portal's devices page", () => {
  test("shows the gateway and its host keys, adds a pasted key that then signs in, refuses a private key, removes a key", async () => {
    const { page } = browser;
    await page.goto(`http://localhost:${rig.server.edgePort}/`);
    await page.getByLabel("Username").fill("paige");
    await page.getByLabel("Password").fill("password-123");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByTestId("current-user").waitFor();
    await page.goto(`http://localhost:${rig.server.edgePort}/devices`);
    const card = page.getByRole("region", { name: "SSH keys" });
    const command = card.getByLabel("An ssh command");
    await command.waitFor();
    expect(await command.inputValue()).toBe(`ssh -p ${rig.server.sshPort} -R myapp:80:localhost:3000 localhost`);
    const shown = await card.getByTestId("host-key").allTextContents();
    expect(shown.length).toBe(2);
    for (const fingerprint of shown) expect(rig.server.output.text()).toContain(fingerprint);

    // a private key pasted by mistake: the server's words, nothing added
    const key = rig.keys.make("ed25519", undefined, "paige@laptop");
    await card.getByLabel("Public key").fill(readFileSync(key.file, "utf8"));
    await card.getByRole("button", { name: "Add the key" }).click();
    await card.getByText("this is a private key").waitFor();

    await card.getByLabel("Public key").fill(key.pub);
    await card.getByRole("button", { name: "Add the key" }).click();
    await card.locator('[data-ssh-key="paige@laptop"]').waitFor();
    expect(await card.locator('[data-ssh-key="paige@laptop"]').textContent()).toContain(key.fingerprint);

    const ssh = rig.ssh(["-N", "-R", `paige:80:localhost:${web.port}`], { key });
    await waitUntil(async () => (await tunnelFetch(rig.server.edgePort, "paige", "/")).status === 200, 15_000, "the tunnel of the page's key");

    await card.getByRole("button", { name: "Remove paige@laptop" }).click();
    await page.getByRole("button", { name: "Remove", exact: true }).click();
    await card.locator('[data-ssh-key="paige@laptop"]').waitFor({ state: "detached" });
    expect(await ssh.proc.exited).toBe(255);
  }, 60_000);
});
