/**
 * The server examples of docs/clients-typescript.md run as written: node runs them from inside
 * this package (so `mcp-eventlog` resolves as an installed package would), against a real
 * service process, and SDK clients use them. The SDK 1.x example is the doc's (and the
 * README's) code block; the SDK 2.x one is `examples/server-v2.mjs`, which the doc shows
 * whole.
 */

import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";

import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

import { connectClient, type Sdk, type TestClient } from "./support/mcp.js";
import { freePort, packageRoot, REPO, type Service, startService } from "./support/service.js";

const DOC = join(REPO, "docs", "clients-typescript.md");

/** The first JavaScript block after the heading "A server in …". */
function example(markdown: string, heading: string): string {
  const section = markdown.split(heading, 2)[1];
  assert.ok(section !== undefined, `no "${heading}" section`);
  const match = /```js\n([\s\S]*?)```/.exec(section);
  assert.ok(match?.[1] !== undefined, "no js block");
  return match[1];
}

describe("the documented server example", () => {
  let service: Service;
  let server: ChildProcess | undefined;
  const script = join(packageRoot(), `.docs-example-${process.pid}.mjs`);

  before(async () => {
    service = await startService("sqlite");
  });

  after(async () => {
    server?.kill();
    rmSync(script, { force: true });
    await service.stop();
  });

  it("is at most 15 lines, and the README shows the same", () => {
    const doc = readFileSync(DOC, "utf8");
    const source = example(doc, "## A server in ");
    const heading = Number(doc.split("## A server in ", 2)[1]?.split(" ", 1)[0]);
    const lines = source.split("\n").filter((line) => line.trim() !== ""); // blank lines aside
    assert.ok(lines.length === heading && heading <= 15, `${lines.length} lines`);
    const readme = readFileSync(join(REPO, "README.md"), "utf8");
    assert.equal(example(readme, "## Using it from an MCP server"), source);
  });

  it("serves MCP sessions against the service", async () => {
    const source = example(readFileSync(DOC, "utf8"), "## A server in ");
    assert.match(source, /listen\(8000\)/);
    assert.match(source, /"http:\/\/127\.0\.0\.1:8080"/);
    const port = await freePort();
    writeFileSync(
      script,
      source
        .replace("listen(8000)", `listen(${port})`)
        .replace("127.0.0.1:8080", service.url.slice(7)),
    );
    let output = "";
    server = spawn(process.execPath, [script], { cwd: packageRoot() });
    server.stdout?.on("data", (chunk: Buffer) => (output += chunk.toString()));
    server.stderr?.on("data", (chunk: Buffer) => (output += chunk.toString()));
    const url = `http://127.0.0.1:${port}/mcp`;
    const session = await connectWithin(url, 30_000, () => output);
    assert.ok(session.sessionId !== undefined);
    await session.close();
  });
});

describe("the documented SDK 2.x example", () => {
  let service: Service;
  let server: ChildProcess | undefined;
  const file = join(packageRoot(), "examples", "server-v2.mjs");

  before(async () => {
    service = await startService("sqlite");
  });

  after(async () => {
    server?.kill();
    await service.stop();
  });

  it("is shown whole in the doc", () => {
    const doc = readFileSync(DOC, "utf8");
    assert.equal(
      example(doc, "## SDK 2.x: one server for every revision"),
      readFileSync(file, "utf8"),
    );
  });

  it("serves legacy sessions (both client generations, stored) and 2026-07-28 requests", async () => {
    const port = await freePort();
    let output = "";
    server = spawn(process.execPath, [file], {
      cwd: packageRoot(),
      env: { ...process.env, PORT: String(port), EVENTLOG_URL: service.url },
    });
    server.stdout?.on("data", (chunk: Buffer) => (output += chunk.toString()));
    server.stderr?.on("data", (chunk: Buffer) => (output += chunk.toString()));
    const url = `http://127.0.0.1:${port}/mcp`;
    for (const sdk of ["v2", "v1"] as const) {
      const session = await connectWithin(url, 30_000, () => output, sdk);
      assert.ok(session.sessionId !== undefined, `${sdk}: a legacy session`);
      assert.deepEqual(await session.call("report", {}), { kind: "result", text: "3 pages" });
      assert.deepEqual(session.notes, ["page 1", "page 2", "page 3"]);
      await session.close();
    }
    const streams = await fetch(`${service.url}/admin/v1/streams?prefix=mcp.`);
    const listed = (await streams.json()) as { streams: unknown[] };
    assert.ok(listed.streams.length >= 2, `${listed.streams.length} streams stored`);

    const modern = new Client(
      { name: "modern", version: "1.0.0" },
      { versionNegotiation: { mode: { pin: "2026-07-28" } } },
    );
    await modern.connect(new StreamableHTTPClientTransport(new URL(url)));
    const result = await modern.callTool({ name: "report", arguments: {} });
    assert.deepEqual(result.content, [{ type: "text", text: "3 pages" }]);
    await modern.close();
    const after = (await (await fetch(`${service.url}/admin/v1/streams?prefix=mcp.`)).json()) as {
      streams: unknown[];
    };
    assert.equal(after.streams.length, listed.streams.length, "a 2026-07-28 call is not stored");
  });
});

/** Connect once the example server listens (a process we start: polled, with a deadline). */
async function connectWithin(
  url: string,
  timeoutMs: number,
  output: () => string,
  sdk: Sdk = "v1",
): Promise<TestClient> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await connectClient(url, { sdk });
    } catch (error) {
      if (Date.now() > deadline) {
        throw new Error(
          `the example server on ${url} never answered: ${String(error)}\n${output()}`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}
