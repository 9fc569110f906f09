/**
 * The real event-log service, as a process of this repository, on SQLite or PostgreSQL.
 *
 * The Python command is `<repo>/.venv/bin/python` unless `EVENTLOG_PYTHON` names another
 * (split on spaces, e.g. `uv run python`). PostgreSQL comes from `EVENTLOG_TEST_POSTGRES_URL`
 * (the Python tests' variable; default the local server, trust auth): each service gets a fresh
 * database, migrated with `python -m app migrate`, dropped when the service stops. When
 * PostgreSQL can not be reached its tests skip, except under `CI=true` (or
 * `EVENTLOG_REQUIRE_POSTGRES=1`), where that is a failure.
 */

import { type ChildProcess, execFile, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const run = promisify(execFile);

export type Backend = "sqlite" | "postgresql";
export const BACKENDS: readonly Backend[] = ["sqlite", "postgresql"];

/** The package's directory (the one with package.json), found from this compiled file. */
export function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, "package.json"))) {
    const up = dirname(dir);
    if (up === dir) throw new Error("package.json not found above the tests");
    dir = up;
  }
  return dir;
}

export const REPO = resolve(packageRoot(), "..", "..");

function pythonCommand(): string[] {
  const given = process.env["EVENTLOG_PYTHON"]?.trim();
  return given ? given.split(/\s+/) : [join(REPO, ".venv", "bin", "python")];
}

/** A free TCP port on 127.0.0.1 right now. */
export function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      server.close(() => resolvePort(port));
    });
  });
}

// ---- PostgreSQL ---------------------------------------------------------------------------

const DEFAULT_POSTGRES_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres";

function postgresServerUrl(): string {
  return process.env["EVENTLOG_TEST_POSTGRES_URL"] ?? DEFAULT_POSTGRES_URL;
}

/** Whether a missing PostgreSQL fails the run instead of skipping its tests. */
export function postgresRequired(): boolean {
  return (
    (process.env["CI"] ?? "").toLowerCase() === "true" ||
    process.env["EVENTLOG_REQUIRE_POSTGRES"] === "1"
  );
}

function withDatabase(url: string, database: string): string {
  const parsed = new URL(url.replace(/^postgresql\+asyncpg:/, "postgresql:"));
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

async function psql(statement: string): Promise<void> {
  const uri = postgresServerUrl().replace(/^postgresql\+asyncpg:/, "postgresql:");
  await run("psql", [uri, "-v", "ON_ERROR_STOP=1", "-q", "-c", statement], { timeout: 15_000 });
}

let reachability: Promise<string | undefined> | undefined;

/** Undefined when PostgreSQL answers; otherwise why not. Asked once per run. */
export function postgresUnreachable(): Promise<string | undefined> {
  reachability ??= psql("SELECT 1").then(
    () => undefined,
    (error: unknown) => (error instanceof Error ? error.message.split("\n")[0] : String(error)),
  );
  return reachability;
}

/** The `skip` option of a PostgreSQL suite: a reason to skip, or false (run; or fail when
 *  PostgreSQL is required and missing, since starting the service will then throw). */
export async function postgresSkip(): Promise<string | false> {
  const why = await postgresUnreachable();
  if (why === undefined || postgresRequired()) return false;
  return `PostgreSQL unreachable (${why}); CI=true makes this a failure`;
}

// ---- the service process ------------------------------------------------------------------

/** A running service process. */
export interface Service {
  readonly backend: Backend;
  readonly url: string;
  readonly port: number;
  /** The database it serves (`EVENTLOG_DATABASE_URL`). */
  readonly databaseUrl: string;
  /** What the process printed so far. */
  output(): string;
  /** Kill the process (as a crash would: live readers would hold a graceful stop for up to
   *  `EVENTLOG_LIVE_MAX_SECONDS`), run `meanwhile`, and start it again on the same port and
   *  database. */
  restart(meanwhile?: () => Promise<void>): Promise<void>;
  /** Stop the process (and drop its PostgreSQL database, remove its SQLite directory). */
  stop(): Promise<void>;
}

export interface ServiceOptions {
  /** Extra `EVENTLOG_*` settings. */
  readonly env?: Readonly<Record<string, string>>;
  /** Another replica: serve the database of this running service (migrated, and dropped
   *  by its own `stop`) instead of a fresh one. */
  readonly replicaOf?: Service;
}

/** The environment of a Python process of the repository: this one's, without its `EVENTLOG_*`
 *  settings, plus `extra`. */
export function serviceEnv(extra: Readonly<Record<string, string>>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (!name.startsWith("EVENTLOG_")) env[name] = value;
  }
  return { ...env, PYTHONPATH: REPO, EVENTLOG_LOG_LEVEL: "warning", ...extra };
}

async function runPython(args: string[], env: NodeJS.ProcessEnv): Promise<void> {
  const [command, ...prefix] = pythonCommand();
  if (command === undefined) throw new Error("EVENTLOG_PYTHON is empty");
  await run(command, [...prefix, ...args], { cwd: REPO, env, timeout: 120_000 });
}

/** Start `python -m app serve` on a free port with a fresh database; resolves when healthy. */
export async function startService(
  backend: Backend,
  options: ServiceOptions = {},
): Promise<Service> {
  let databaseUrl: string;
  let cleanup: () => Promise<void>;
  if (options.replicaOf !== undefined) {
    databaseUrl = options.replicaOf.databaseUrl;
    cleanup = async () => undefined; // the first replica's `stop` drops the database
  } else if (backend === "sqlite") {
    const dir = mkdtempSync(join(tmpdir(), "eventlog-ts-"));
    databaseUrl = `sqlite+aiosqlite:///${join(dir, "eventlog.db")}`;
    cleanup = async () => rmSync(dir, { recursive: true, force: true });
  } else {
    const why = await postgresUnreachable();
    if (why !== undefined) throw new Error(`PostgreSQL is required but unreachable: ${why}`);
    const name = `eventlog_ts_${process.pid}_${Math.random().toString(16).slice(2, 10)}`;
    await psql(`CREATE DATABASE "${name}"`);
    databaseUrl = withDatabase(postgresServerUrl(), name).replace(
      /^postgresql:/,
      "postgresql+asyncpg:",
    );
    cleanup = () => psql(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    await runPython(["-m", "app", "migrate"], serviceEnv({ EVENTLOG_DATABASE_URL: databaseUrl }));
  }
  const env = serviceEnv({ EVENTLOG_DATABASE_URL: databaseUrl, ...options.env });
  const port = await freePort();
  let process_ = launch(env, port);
  const service: Service = {
    backend,
    databaseUrl,
    url: `http://127.0.0.1:${port}`,
    port,
    output: () => process_.output,
    restart: async (meanwhile) => {
      await terminate(process_.child, "SIGKILL");
      await meanwhile?.();
      process_ = launch(env, port);
      await waitHealthy(service.url, process_);
    },
    stop: async () => {
      await terminate(process_.child);
      await cleanup();
    },
  };
  try {
    await waitHealthy(service.url, process_);
  } catch (error) {
    await service.stop();
    throw error;
  }
  return service;
}

/** A Python program of the repository, started by `launchPython`. */
export interface Launched {
  readonly child: ChildProcess;
  output: string;
  exited: boolean;
}

function launch(env: NodeJS.ProcessEnv, port: number): Launched {
  return launchPython(["-m", "app", "serve", "--port", String(port)], env);
}

/** `python <args>` in the repository (the service, or the hostile fake of
 *  `tests/support/hostile_service.py`), its output kept. */
export function launchPython(args: readonly string[], env: NodeJS.ProcessEnv): Launched {
  const [command, ...prefix] = pythonCommand();
  if (command === undefined) throw new Error("EVENTLOG_PYTHON is empty");
  const child = spawn(command, [...prefix, ...args], {
    cwd: REPO,
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  const launched: Launched = { child, output: "", exited: false };
  const collect = (chunk: Buffer): void => {
    launched.output = (launched.output + chunk.toString()).slice(-20_000);
  };
  child.stdout?.on("data", collect);
  child.stderr?.on("data", collect);
  child.on("exit", () => {
    launched.exited = true;
  });
  return launched;
}

/** Wait until `url` answers 2xx (`/healthz` of the service by default). */
export async function waitHealthy(
  url: string,
  launched: Launched,
  timeoutMs = 60_000,
  path = "/healthz",
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (launched.exited) throw new Error(`the process exited:\n${launched.output}`);
    try {
      const response = await fetch(`${url}${path}`, { signal: AbortSignal.timeout(2_000) });
      if (response.ok) return;
    } catch {
      // not listening yet
    }
    // Polling a process we do not control: there is no event to await.
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url} did not become healthy in ${timeoutMs} ms:\n${launched.output}`);
}

/** Stop a launched process (SIGKILL after 10 s). */
export async function terminate(
  child: ChildProcess,
  signal: NodeJS.Signals = "SIGTERM",
): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  child.kill(signal);
  const killer = setTimeout(() => child.kill("SIGKILL"), 10_000);
  await exited;
  clearTimeout(killer);
}
