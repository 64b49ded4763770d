/**
 * Headless Chromium (the Debian package) driven by playwright-core, with a
 * fresh profile that is removed afterwards. Every request the page makes is
 * recorded, so a test can check that nothing left the admin server.
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type BrowserContext, type Page } from "playwright-core";
import { chromiumPath } from "../harness/chromium.ts";
import { ADMIN_PASSWORD } from "../harness/server.ts";


export const DESKTOP = { width: 1280, height: 860 };
export const PHONE = { width: 360, height: 740 };

export interface TestBrowser extends AsyncDisposable {
  context: BrowserContext;
  page: Page;
  /** Every request the page made (documents, scripts, styles, fetches, images). */
  requests: { method: string; url: string }[];
  /** Uncaught page errors and console errors, to fail on. */
  pageErrors: string[];
}

export async function openBrowser(viewport = DESKTOP): Promise<TestBrowser> {
  const executablePath = chromiumPath();
  if (!executablePath || !existsSync(executablePath)) {
    throw new Error("no Chromium, Chrome or Edge found, and Debian's chromium could not be installed: install one, or set BURROW_CHROMIUM to its binary");
  }
  const profile = mkdtempSync(join(tmpdir(), "burrow-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run"],
    viewport,
    deviceScaleFactor: 1,
    locale: "en-US",
    timezoneId: "Europe/Berlin", // not UTC, so a date shown in local time would be caught
  });
  context.setDefaultTimeout(10_000);
  const page = context.pages()[0] ?? (await context.newPage());
  const requests: TestBrowser["requests"] = [];
  const pageErrors: string[] = [];
  context.on("request", (req) => requests.push({ method: req.method(), url: req.url() }));
  context.on("weberror", (err) => pageErrors.push(String(err.error())));
  // console errors too (a Content-Security-Policy refusal lands there), except the
  // browser's own note on each 4xx answer, which the tests provoke on purpose
  context.on("console", (msg) => {
    if (msg.type() === "error" && !msg.text().startsWith("Failed to load resource")) pageErrors.push(msg.text());
  });
  return {
    context,
    page,
    requests,
    pageErrors,
    async [Symbol.asyncDispose]() {
      await context.close().catch(() => {});
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** Signs in through the sign-in form and waits for the header to name the user. */
export async function signIn(page: Page, adminUrl: string, username = "admin", password = ADMIN_PASSWORD) {
  await page.goto(adminUrl + "/");
  await page.getByLabel("Username").fill(username);
  await page.getByLabel("Password").fill(password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByTestId("current-user").waitFor();
}
