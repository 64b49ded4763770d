/**
 * The panel's HTTPS page in headless Chromium, against the admin app in this
 * process with a fake certificate report (the real server's report comes from
 * the ACME machinery, which no test here drives): the mode at the top, each
 * certificate with its names (a wildcard said so), issuer, validity and
 * expiry in words and colour, next renewal, the last failure with its code
 * and the CA's retry-after, the empty state, 360 px wide.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Page } from "playwright-core";
import type { CertificateReport } from "../../src/acme/report.ts";
import { startAdminApp, type InProcessAdmin } from "../harness/admin-app.ts";
import { DESKTOP, openBrowser, PHONE, signIn, type TestBrowser } from "./browser.ts";

// page.evaluate() callbacks run in the browser; the root tsconfig has no DOM types
declare const document: any;
declare const getComputedStyle: any;

const DAY = 86_400_000;
const HOUR = 3_600_000;
const at = (ms: number) => new Date(Date.now() + ms).toISOString();

const DIRECTORY = "https://acme-staging-v02.api.letsencrypt.org/directory";
const ACME: CertificateReport = {
  mode: "acme",
  directory: DIRECTORY,
  certificates: [
    {
      id: "*.tunnels.example.com",
      names: ["*.tunnels.example.com", "tunnels.example.com"],
      issuer: "(STAGING) Pretend Pear X1",
      not_before: at(-30 * DAY),
      not_after: at(60 * DAY + HOUR),
      last_error: null,
      next_renewal: at(30 * DAY + HOUR),
    },
    {
      id: "admin.example.com",
      names: ["admin.example.com"],
      issuer: "(STAGING) Pretend Pear X1",
      not_before: at(-81 * DAY),
      not_after: at(9 * DAY + HOUR),
      last_error: {
        code: "RATE_LIMITED",
        message: "the ACME CA's rate limit was hit: too many certificates already issued",
        at: at(-2 * HOUR),
        retryAfter: at(3 * HOUR + 10 * 60_000),
      },
      next_renewal: at(3 * HOUR + 10 * 60_000),
    },
    {
      id: "old.example.com",
      names: ["old.example.com"],
      issuer: "(STAGING) Pretend Pear X1",
      not_before: at(-92 * DAY),
      not_after: at(-2 * DAY - HOUR),
      last_error: { code: "CHALLENGE_FAILED", message: "a challenge failed: no TXT record found", at: at(-10 * 60_000) },
      next_renewal: at(HOUR + 30 * 60_000),
    },
  ],
};

let current: CertificateReport = ACME;
let app: InProcessAdmin;
let browser: TestBrowser;
let page: Page;

beforeAll(async () => {
  app = await startAdminApp({ certificates: () => current });
  browser = await openBrowser(DESKTOP);
  page = browser.page;
  await signIn(page, app.adminUrl);
}, 30_000);

afterAll(async () => {
  await browser?.[Symbol.asyncDispose]();
  await app?.stop();
});

const card = (id: string) => page.locator("section.certificate").filter({ has: page.getByRole("heading", { name: id, exact: true }) });
const colour = (locator: ReturnType<Page["locator"]>) => locator.evaluate((el: any) => getComputedStyle(el).color);

describe("the HTTPS page", () => {
  test("is in the main navigation and says at the top where certificates come from", async () => {
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "HTTPS" }).click();
    await page.getByRole("heading", { name: "HTTPS", level: 1 }).waitFor();
    expect(new URL(page.url()).pathname).toBe("/certificates");
    await page.getByText(`Certificates from ${DIRECTORY}, renewed automatically.`).waitFor();
    expect(await page.getByTestId("certificate-mode").textContent()).toContain("ACME");
    expect(await page.title()).toBe("HTTPS · burrow admin");
  });

  test("shows a certificate: names with the wildcard said so, issuer, validity, expiry and next renewal", async () => {
    const c = card("*.tunnels.example.com");
    await c.waitFor();
    const names = c.locator(".cert-names li");
    expect(await names.allTextContents()).toEqual(["*.tunnels.example.com wildcard", "tunnels.example.com "]);
    const text = (await c.textContent())!;
    expect(text).toContain("(STAGING) Pretend Pear X1");
    expect(text).toContain(`Valid from${ACME.certificates[0]!.not_before!.slice(0, 16).replace("T", " ")} UTC`);
    expect(text).toContain(`${ACME.certificates[0]!.not_after!.slice(0, 16).replace("T", " ")} UTC`);
    expect(text).toContain(`${ACME.certificates[0]!.next_renewal!.slice(0, 16).replace("T", " ")} UTC (in 30 days)`);
    const expiry = c.getByTestId("certificate-expiry");
    expect(await expiry.textContent()).toBe("expires in 60 days");
    expect(await expiry.getAttribute("class")).toBe("expiry ok");
    expect(await c.getByTestId("certificate-error").count()).toBe(0);
  });

  test("a certificate under 14 days from expiry is in the warning colour; an expired one in red", async () => {
    const soon = card("admin.example.com").getByTestId("certificate-expiry");
    expect(await soon.textContent()).toBe("expires in 9 days");
    expect(await colour(soon)).toBe("rgb(154, 98, 0)");
    const gone = card("old.example.com").getByTestId("certificate-expiry");
    expect(await gone.textContent()).toBe("expired 2 days ago");
    expect(await colour(gone)).toBe("rgb(192, 57, 43)");
    expect(await colour(card("*.tunnels.example.com").getByTestId("certificate-expiry"))).toBe("rgb(47, 125, 79)");
  });

  test("the last failure comes first in its card: code, message, when, and the CA's retry-after", async () => {
    const error = card("admin.example.com").getByTestId("certificate-error");
    const text = (await error.textContent())!;
    expect(text).toContain("Last attempt failed (2 h ago");
    expect(text).toContain("RATE_LIMITED");
    expect(text).toContain("too many certificates already issued");
    const retry = ACME.certificates[1]!.last_error!.retryAfter!;
    expect(text).toContain(`The CA asks to wait until ${retry.slice(0, 16).replace("T", " ")} UTC (in 3 h).`);
    // above the facts, where it is seen first
    const order = await card("admin.example.com").evaluate((el: any) => [...el.querySelectorAll("[data-testid=certificate-error], dl")].map((e: any) => e.tagName));
    expect(order).toEqual(["DIV", "DL"]);

    const other = (await card("old.example.com").getByTestId("certificate-error").textContent())!;
    expect(other).toContain("CHALLENGE_FAILED");
    expect(other).toContain("no TXT record found");
    expect(other).not.toContain("The CA asks to wait");
  });

  test("files given at start: the operator renews them", async () => {
    current = { mode: "files", certificates: [{ ...ACME.certificates[0]!, id: "tunnels.example.com", names: ["tunnels.example.com"], next_renewal: null }] };
    await page.reload();
    await page.getByText("From files given at start: renew them yourself and restart.").waitFor();
    const text = (await card("tunnels.example.com").textContent())!;
    expect(text).toContain("Next renewalby hand: replace the files and restart");
    expect(text).not.toContain("wildcard");
  });

  test("no HTTPS here: says so, and the empty state instead of certificates", async () => {
    current = { mode: "off", certificates: [] };
    await page.reload();
    await page.getByText("No HTTPS on the public port: a proxy in front terminates TLS, or none.").waitFor();
    await page.getByText("This server does not serve HTTPS itself, so it holds no certificate.").waitFor();
    expect(await page.locator("section.certificate").count()).toBe(0);

    current = { mode: "acme", directory: DIRECTORY, certificates: [] };
    await page.reload();
    await page.getByText(/^No certificate yet\./).waitFor();
  });

  test("fits 360 px wide, long names and all", async () => {
    current = ACME;
    await page.setViewportSize(PHONE);
    await page.reload();
    await card("admin.example.com").getByTestId("certificate-error").waitFor();
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBe(PHONE.width);
    await page.setViewportSize(DESKTOP);
  });

  test("made no request outside the admin server and raised no page error", () => {
    const origin = new URL(app.adminUrl).origin;
    expect(browser.requests.filter((r) => !r.url.startsWith(origin) && !r.url.startsWith("data:"))).toEqual([]);
    expect(browser.pageErrors).toEqual([]);
  });
});
