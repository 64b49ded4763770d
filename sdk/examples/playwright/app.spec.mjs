import { expect, test } from "@playwright/test";

test("the app loads through its public burrow URL", async ({ page }) => {
  await page.goto(`${process.env.BASE_URL}/welcome`);
  await expect(page.locator("h1")).toHaveText("hello through burrow");
  await expect(page.locator("#path")).toHaveText("/welcome");
});
