#!/usr/bin/env node
// A stdio MCP server in Node.js, installed as a package in node_modules: it needs its
// dependency (`echo-dep`, beside it in node_modules) to answer. One tool, `echo`.
const readline = require("readline");
const { shout } = require("echo-dep");

const tool = {
  name: "echo",
  description: "Say the text back, louder.",
  inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
};

function answer(method, params) {
  if (method === "initialize") {
    return {
      protocolVersion: params.protocolVersion || "2025-06-18",
      capabilities: { tools: {} },
      serverInfo: { name: "node-echo", version: "1" },
    };
  }
  if (method === "tools/list") return { tools: [tool] };
  if (method === "tools/call") {
    return { content: [{ type: "text", text: shout(params.arguments.text) }], isError: false };
  }
  return {};
}

readline.createInterface({ input: process.stdin }).on("line", (line) => {
  const message = JSON.parse(line);
  if (message.id !== undefined) {
    const result = answer(message.method, message.params || {});
    process.stdout.write(JSON.stringify({ jsonrpc: "2.0", id: message.id, result }) + "\n");
  }
});
