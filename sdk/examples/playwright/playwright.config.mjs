import { defineConfig } from "@playwright/test";

export default defineConfig({
  testDir: ".",
  testMatch: "*.spec.mjs",
  globalSetup: "./global-setup.mjs",
  reporter: "line",
  use: {
    // a Chromium of the system's (Debian's chromium), or Playwright's own when unset
    launchOptions: process.env.CHROMIUM ? { executablePath: process.env.CHROMIUM, args: ["--no-sandbox"] } : {},
  },
});
