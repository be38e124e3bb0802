import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { expect } from 'chai';
import { eventually } from '../support/oauth.js';
import { entryPoint } from '../support/entry-point.js';
import { ADMIN_KEY, freePort } from '../support/server.js';

/**
 * SIGTERM while the server is still starting (src/main.ts exitOnSignalsWhileStarting). The start
 * is held where it is deterministic: the store is a PostgreSQL URL whose "server" accepts the
 * connection and never answers, with a 60 s connect timeout; the signal is sent once the
 * connection came, so the process is then inside its start for sure.
 */
describe('A stop asked for while the server starts', function () {
  let silent: Server;
  let port: number;
  const sockets: Socket[] = [];
  const started: ChildProcess[] = [];

  before(async function () {
    silent = createServer((socket) => {
      sockets.push(socket);
      socket.on('error', () => undefined);
    });
    silent.listen(0, '127.0.0.1');
    await once(silent, 'listening');
    port = (silent.address() as { port: number }).port;
  });
  after(async function () {
    for (const child of started) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    for (const socket of sockets) socket.destroy();
    silent?.close();
  });

  /** The server's command (under `prefix`), its output kept; resolves once it is connecting to the silent store. */
  async function startHeld(prefix: string[]): Promise<{ child: ChildProcess; output: () => string }> {
    const connectionsBefore = sockets.length;
    const [command, ...args] = [...prefix, process.execPath, ...entryPoint('main')];
    const child = spawn(command!, args, {
      env: {
        PATH: process.env.PATH ?? '',
        PORT: String(await freePort()),
        STORE_URL: `postgresql://arbiter:secret@127.0.0.1:${port}/arbiter?connect_timeout_ms=60000`,
        SERVICE_ADMIN_API_KEY: ADMIN_KEY,
        LOG_LEVEL: 'info',
        WORKERS: '1',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    started.push(child);
    let output = '';
    child.stdout!.on('data', (chunk: Buffer) => (output += chunk));
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk));
    await eventually(async () => sockets.length > connectionsBefore || child.exitCode !== null, 30_000, 20);
    expect(child.exitCode, output).to.equal(null);
    return { child, output: () => output };
  }

  it('exits at once, saying so, instead of going on starting', async function () {
    const { child, output } = await startHeld([]);
    const signalled = Date.now();
    child.kill('SIGTERM');
    const { code, signal } = await exited(child);
    // Was: killed by the signal's default action (no line, no clean exit code).
    expect({ code, signal }, output()).to.deep.equal({ code: 0, signal: null });
    expect(Date.now() - signalled).to.be.below(5_000);
    expect(output()).to.contain('"msg":"stopped while starting"');
  });

  it('exits at once as PID 1 (a container), which ignores a signal it has no handler for', async function () {
    // A PID namespace of its own, as in a container: the server is its init process.
    if (spawnSync('unshare', ['-p', '-f', '--mount-proc', 'true']).status !== 0) this.skip();
    const { child, output } = await startHeld(['unshare', '-p', '-f', '--mount-proc']);
    const server = childPid(child.pid!);
    const signalled = Date.now();
    process.kill(server, 'SIGTERM');
    // Was: the signal was dropped, and the server went on starting (then served) until killed.
    const { code } = await exited(child);
    expect(code, output()).to.equal(0);
    expect(Date.now() - signalled).to.be.below(5_000);
    expect(output()).to.contain('"msg":"stopped while starting"');
  });
});

/** How `child` ended, within 10 s (a start held by the store lasts a minute); 'close': its output read to the end. */
async function exited(child: ChildProcess): Promise<{ code: number | null; signal: string | null }> {
  const timer = new Promise<never>((_, reject) =>
    setTimeout(() => reject(new Error('the process did not exit within 10 s of the signal')), 10_000).unref(),
  );
  const [code, signal] = (await Promise.race([once(child, 'close'), timer])) as [number | null, string | null];
  return { code, signal };
}

/** The one child of `pid` (unshare's forked init: the server). */
function childPid(pid: number): number {
  const children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).map(Number);
  expect(children, `the children of ${pid}`).to.have.length(1);
  return children[0]!;
}
