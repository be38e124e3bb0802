import { spawn, type ChildProcess } from 'node:child_process';
import { ADMIN_KEY } from './server.js';

/**
 * Starts `npm start`'s entry point as a process of its own (for measuring its memory, or
 * killing it) on a SQLite file in `dataDir` (or the store `env.STORE_URL` names), and resolves
 * once /healthz answers 200.
 */
export async function startServerProcess(options: {
  port: number;
  dataDir: string;
  env?: Record<string, string>;
}): Promise<ChildProcess> {
  const url = `http://127.0.0.1:${options.port}`;
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    env: {
      PATH: process.env.PATH ?? '',
      PORT: String(options.port),
      STORE_URL: `sqlite:${options.dataDir}/arbiter.db`,
      SERVICE_ADMIN_API_KEY: ADMIN_KEY,
      LOG_LEVEL: 'silent',
      ...options.env,
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (chunk) => (stderr += chunk));
  const deadline = Date.now() + 60_000;
  while ((await fetch(`${url}/healthz`).catch(() => undefined))?.status !== 200) {
    if (Date.now() > deadline || child.exitCode !== null)
      throw new Error(`the server did not become ready: ${stderr.slice(-2000)}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return child;
}
