/**
 * The inspector's page in headless Chromium, for a tunnel with a traffic
 * policy: a request let through shows its request rules, its response
 * rules with their actions and both phases' log fields (a map as its
 * JSON), once the server's
 * note comes (the open page picks it up by itself); one whose response a
 * rule replaced says which rule, which action and the status the visitor
 * got.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { openBrowser, type TestBrowser } from "../panel/browser.ts";
import { startInspectedAgent, startRig, startUpstream, type InspectedAgent, type Rig, type Upstream } from "../inspect/rig.ts";
import { policyFile } from "./rig.ts";

const OWN = policyFile(`
on_http_request:
  - name: logged
    expressions: ["req.url.path.startsWith('/logged')"]
    actions: [{ type: log, config: { metadata: { seen: "\${req.url.path}", where: { path: "\${req.url.path}", n: [1, true] } } } }]
on_http_response:
  - name: stamp
    expressions: ["req.url.path.startsWith('/logged')"]
    actions:
      - type: add-headers
        config: { headers: { x-stamped: "yes" } }
      - type: log
        config: { metadata: { answered: "\${res.status_code}" } }
  - name: hide missing
    expressions: ["res.status_code == 404"]
    actions: [{ type: custom-response, config: { status_code: 410, body: "gone" } }]
`);

let rig: Rig;
let up: Upstream;
let a: InspectedAgent;
let browser: TestBrowser;

beforeAll(async () => {
  rig = await startRig();
  up = startUpstream();
  a = await startInspectedAgent(rig, up.port, ["--policy-file", OWN.path]);
  browser = await openBrowser();
}, 30_000);
afterAll(async () => {
  await browser?.[Symbol.asyncDispose]();
  await a?.[Symbol.asyncDispose]();
  up?.[Symbol.dispose]();
  await rig?.[Symbol.asyncDispose]();
  OWN[Symbol.dispose]();
});

const row = (path: string) => browser.page.locator(".request-row", { hasText: path });

test("a request let through: its request rules, its response rules with their actions, and both phases' log fields", async () => {
  const { page } = browser;
  await page.goto(a.inspector + "/");
  await page.locator(".live.on").waitFor();
  await (await a.visit("/logged/page")).text();
  await row("/logged/page").click();
  const policy = page.locator("section.policy");
  await policy.locator(".response-rules").waitFor();
  expect(await policy.locator(".request-rules").textContent()).toBe("request rules matched: logged");
  expect(await policy.locator(".response-rules").textContent()).toBe("response rules matched: stamp (add-headers, log)");
  expect(await policy.locator(".ended").textContent()).toBe("the service's answer went to the visitor");
  expect(await page.getByRole("table", { name: "request log fields" }).textContent()).toBe('seen/logged/pagewhere{"path":"/logged/page","n":[1,true]}');
  expect(await page.getByRole("table", { name: "response log fields" }).textContent()).toBe("answered200");
}, 30_000);

test("a response a rule replaced: the rule, the action and the status the visitor got", async () => {
  const { page } = browser;
  expect((await a.visit("/missing")).status).toBe(410);
  await row("/missing").click();
  const ended = page.locator("section.policy .ended", { hasText: "replaced" });
  await ended.waitFor();
  expect(await ended.textContent()).toBe("response replaced by rule hide missing: custom-response (410)");
}, 30_000);
