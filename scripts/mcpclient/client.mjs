// An external MCP client for microbox: the official TypeScript SDK's
// Client starts `MICROBOX mcp` on stdio, lists its tools and calls
// run_python, checking what an agent relies on. Prints PASS, or exits 1
// with the reason. Usage: node client.mjs PATH/TO/microbox
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

function fail(msg) {
  console.error("FAIL: " + msg);
  process.exit(1);
}

const microbox = process.argv[2];
if (!microbox) fail("usage: node client.mjs PATH/TO/microbox");
const transport = new StdioClientTransport({ command: microbox, args: ["mcp"], env: process.env, stderr: "inherit" });
const client = new Client({ name: "microbox-node-client", version: "1.0.0" });
await client.connect(transport);

const { tools } = await client.listTools();
const tool = tools.find((t) => t.name === "run_python");
if (!tool) fail("no run_python tool: " + JSON.stringify(tools));
if (tool.annotations?.openWorldHint !== false || tool.annotations?.readOnlyHint !== true)
  fail("annotations do not say sandboxed and offline: " + JSON.stringify(tool.annotations));
if (!tool.inputSchema?.properties?.code || !tool.outputSchema?.properties?.status)
  fail("schemas: " + JSON.stringify([tool.inputSchema, tool.outputSchema]));

const res = await client.callTool({ name: "run_python", arguments: { code: "print(sum(range(10)))", timeout: 5 } });
if (res.isError) fail("call failed: " + JSON.stringify(res));
if (res.structuredContent?.status !== "ok" || res.structuredContent?.stdout !== "45\n")
  fail("structured content: " + JSON.stringify(res.structuredContent));
if (!res.content?.[0]?.text?.includes("45")) fail("text summary: " + JSON.stringify(res.content));

const bad = await client.callTool({ name: "run_python", arguments: { code: "1", timeout: "soon" } });
if (!bad.isError) fail("a bad timeout was not a tool error: " + JSON.stringify(bad));

await client.close();
console.log("PASS: listed run_python, ran it (ok, stdout 45), and had bad input refused");
