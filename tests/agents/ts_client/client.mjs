// Drives `till mcp` with the official TypeScript MCP SDK client, as a harness written in
// TypeScript would (tests/agents/test_mcp_typescript.py runs it and judges what it saw).
//
//   node client.mjs PYTHON FOLDER FIRST_SNAPSHOT LONG_COMMAND
//
// PYTHON runs `-m tillage` (TILLAGE_HOME etc. come from the environment). Prints one JSON
// document: what each step answered.
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const [python, folder, first, LONG] = process.argv.slice(2);
const report = { steps: {} };
const till = (...args) =>
  execFileSync(python, ["-m", "tillage", "--repo", folder, "--json", ...args], {
    cwd: folder,
    env: process.env,
    encoding: "utf8",
  });

const transport = new StdioClientTransport({
  command: python,
  args: ["-m", "tillage", "--repo", folder, "mcp"],
  env: process.env,
  cwd: folder,
  stderr: "pipe",
});
const client = new Client({ name: "tillage-ts-test", version: "0" }, { capabilities: {} });
let changes = 0;
client.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
  changes += 1;
});

async function announced(count) {
  const deadline = Date.now() + 20000;
  while (changes < count) {
    if (Date.now() > deadline) throw new Error(`no list_changed #${count} within 20 s`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const call = async (name, args) => {
  const r = await client.callTool({ name, arguments: args });
  return { isError: r.isError === true, structured: r.structuredContent, text: r.content.map((c) => c.text).join("\n") };
};

await client.connect(transport);
report.server = client.getServerVersion();
report.capabilities = client.getServerCapabilities();
report.steps.tools = (await client.listTools()).tools.map((t) => ({ name: t.name, annotations: t.annotations }));
report.steps.snapshots = await call("workspace_snapshots", { limit: 5 });
report.steps.preview = await call("workspace_restore", { snapshot: first });
report.steps.fork = await call("workspace_fork", { name: "ts-fork", command: "echo from-ts > ts.txt; echo said-so" });
report.steps.error = await call("workspace_restore", { snapshot: "abcdef" });

till("forget");
await announced(1);
report.steps.after_forget = (await client.listTools()).tools.length;
report.steps.forgotten_call = await call("workspace_snapshots", {});
till("watch", "--no-daemon");
await announced(2);
report.steps.after_watch = (await client.listTools()).tools.length;
report.changes = changes;

// A harness that ends its session while a command runs: close() ends stdin, then SIGTERM, then
// SIGKILL, 2 s apart. The command must be stopped (no orphan) and its fork sealed.
const note = `${folder}/../${folder.split("/").pop()}.forks/ts-slow/note.txt`;
const running = client
  .callTool({ name: "workspace_fork", arguments: { name: "ts-slow", command: LONG } })
  .catch((e) => ({ closed: String(e) }));
const deadline = Date.now() + 20000;
while (!existsSync(note)) {
  if (Date.now() > deadline) throw new Error("the slow fork's command never started");
  await new Promise((r) => setTimeout(r, 50));
}
await new Promise((r) => setTimeout(r, 300)); // its sleeps are running by now
await client.close();
report.closed_call = await running;
process.stdout.write(JSON.stringify(report) + "\n");
