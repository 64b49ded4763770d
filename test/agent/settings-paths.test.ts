import { expect, test } from "bun:test";
import { configFile } from "../../src/agent/settings/paths.ts";

test("Linux: $XDG_CONFIG_HOME/burrow, else ~/.config/burrow", () => {
  expect(configFile({ XDG_CONFIG_HOME: "/x/cfg", HOME: "/home/ann" }, "linux", "/home/ann")).toBe("/x/cfg/burrow/config.json");
  expect(configFile({ HOME: "/home/ann" }, "linux", "/home/ann")).toBe("/home/ann/.config/burrow/config.json");
  expect(configFile({}, "freebsd", "/usr/home/ann")).toBe("/usr/home/ann/.config/burrow/config.json");
  // an empty XDG_CONFIG_HOME counts as unset, as the XDG spec says
  expect(configFile({ XDG_CONFIG_HOME: "", HOME: "/home/ann" }, "linux", "/home/ann")).toBe("/home/ann/.config/burrow/config.json");
});

test("macOS: ~/Library/Application Support/burrow, or $XDG_CONFIG_HOME/burrow when it is set", () => {
  expect(configFile({ HOME: "/Users/Ann Lee" }, "darwin", "/Users/Ann Lee")).toBe("/Users/Ann Lee/Library/Application Support/burrow/config.json");
  expect(configFile({ XDG_CONFIG_HOME: "/Users/ann/.config" }, "darwin", "/Users/ann")).toBe("/Users/ann/.config/burrow/config.json");
});

test("Windows: %APPDATA%\\burrow, else the profile's AppData\\Roaming, with backslashes and spaces kept", () => {
  expect(configFile({ APPDATA: "C:\\Users\\Ann Lee\\AppData\\Roaming" }, "win32", "C:\\Users\\Ann Lee")).toBe("C:\\Users\\Ann Lee\\AppData\\Roaming\\burrow\\config.json");
  expect(configFile({ USERPROFILE: "D:\\Profiles\\ann" }, "win32", "C:\\ignored")).toBe("D:\\Profiles\\ann\\AppData\\Roaming\\burrow\\config.json");
  expect(configFile({}, "win32", "C:\\Users\\ann")).toBe("C:\\Users\\ann\\AppData\\Roaming\\burrow\\config.json");
  // XDG_CONFIG_HOME means nothing on Windows
  expect(configFile({ XDG_CONFIG_HOME: "/x", APPDATA: "C:\\AppData" }, "win32", "C:\\Users\\ann")).toBe("C:\\AppData\\burrow\\config.json");
});
