/**
 * The server example of docs/clients-typescript.md (and the README) runs as written: node
 * runs it from inside this package (so `mcp-eventlog` resolves as an installed package would),
 * against a real service process, and the SDK's client opens a session with it.
 */

import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";

import { connectClient, type TestClient } from "./support/mcp.js";
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
    assert.ok(session.transport.sessionId !== undefined);
    await session.client.close();
  });
});

/** Connect once the example server listens (a process we start: polled, with a deadline). */
async function connectWithin(
  url: string,
  timeoutMs: number,
  output: () => string,
): Promise<TestClient> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await connectClient(url);
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
