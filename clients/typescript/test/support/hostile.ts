/** The hostile fake service (`hostile-server.ts`) as a process a test starts and stops. */

import { type ChildProcess, spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

/** What the recorder behind the redirects received, and the bytes sent per misbehaviour. */
export interface HostileState {
  readonly received: readonly { method: string; path: string; body: string }[];
  readonly sent: Readonly<Record<string, number>>;
}

export class HostileService {
  private constructor(
    private readonly child: ChildProcess,
    readonly port: number,
  ) {}

  static async start(): Promise<HostileService> {
    const program = join(dirname(fileURLToPath(import.meta.url)), "hostile-server.js");
    const child = spawn(process.execPath, [program], { stdio: ["ignore", "pipe", "inherit"] });
    const lines = createInterface({ input: child.stdout! });
    const first = await new Promise<string>((resolve, reject) => {
      lines.once("line", resolve);
      child.once("exit", (code) => reject(new Error(`the hostile service exited (${code})`)));
    });
    lines.close();
    const { port } = JSON.parse(first) as { port: number };
    return new HostileService(child, port);
  }

  /** The base URL of one misbehaviour. */
  url(mode: string): string {
    return `http://127.0.0.1:${this.port}/${mode}`;
  }

  async state(): Promise<HostileState> {
    const response = await fetch(`http://127.0.0.1:${this.port}/_state`);
    return (await response.json()) as HostileState;
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null) return;
    const exited = new Promise<void>((resolve) => this.child.once("exit", () => resolve()));
    this.child.kill("SIGTERM");
    await exited;
  }
}
