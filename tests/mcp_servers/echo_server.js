#!/usr/bin/env node
// A stdio MCP server in Node.js, installed as a package in node_modules: it needs its
// dependency (`echo-dep`, beside it in node_modules) to answer. Tools: `echo`, and `get`
// (a URL's text, by Node's own fetch: WebAssembly inside).
const readline = require("readline");
const { shout } = require("echo-dep");

const tools = [
  {
    name: "echo",
    description: "Say the text back, louder.",
    inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
  },
  {
    name: "get",
    description: "The text at a URL.",
    inputSchema: { type: "object", properties: { url: { type: "string" } }, required: ["url"] },
  },
];

function text(value) {
  return { content: [{ type: "text", text: value }], isError: false };
}

async function answer(method, params) {
  if (method === "initialize") {
    return {
      protocolVersion: params.protocolVersion || "2025-06-18",
      capabilities: { tools: {} },
      serverInfo: { name: "node-echo", version: "1" },
    };
  }
  if (method === "tools/list") return { tools };
  if (method === "tools/call" && params.name === "get") {
    try {
      return text(await (await fetch(params.arguments.url)).text());
    } catch (error) {
      return { content: [{ type: "text", text: String(error.cause || error) }], isError: true };
    }
  }
  if (method === "tools/call") return text(shout(params.arguments.text));
  return {};
}

readline.createInterface({ input: process.stdin }).on("line", (line) => {
  const message = JSON.parse(line);
  if (message.id !== undefined) {
    answer(message.method, message.params || {}).then((result) => {
      process.stdout.write(JSON.stringify({ jsonrpc: "2.0", id: message.id, result }) + "\n");
    });
  }
});
