/**
 * Ory Hydra 2.3.0 as the bench's peer: built from the Go module proxy by scripts/hydra.sh into
 * .cache/hydra (never committed), run with its defaults (`serve all --dev`: plain HTTP on
 * loopback, everything else as shipped: SQLite, opaque tokens, client secrets hashed with BCrypt
 * and checked on every request) on a SQLite file of its own. It gets a confidential client like
 * Arbiter's machine client; introspection goes to its admin port, which authenticates no caller.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { projectPath } from '../src/config/index.js';
import { basic, FORM } from '../test/support/oauth.js';
import { freePort } from '../test/support/server.js';

export interface HydraTarget {
  /** The public port (token endpoint). */
  url: string;
  /** The admin port (introspection, clients). */
  adminUrl: string;
  /** Basic authorization of its client_credentials client. */
  machine: string;
  /** An access token of that client (scope read), for the introspection scenario. */
  validToken: string;
  pid: number | undefined;
  close(): Promise<void>;
}

export async function startHydra(): Promise<HydraTarget> {
  const binary = execFileSync('bash', [projectPath('scripts', 'hydra.sh'), 'build'], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  }).trim();
  const dir = mkdtempSync(join(tmpdir(), 'arbiter-bench-hydra-'));
  const [publicPort, adminPort] = [await freePort(), await freePort()];
  const url = `http://127.0.0.1:${publicPort}`;
  const adminUrl = `http://127.0.0.1:${adminPort}`;
  const env = {
    PATH: process.env.PATH ?? '',
    DSN: `sqlite://${join(dir, 'hydra.sqlite')}?_fk=true`,
    SECRETS_SYSTEM: randomBytes(24).toString('base64url'),
    URLS_SELF_ISSUER: url,
    SERVE_PUBLIC_HOST: '127.0.0.1',
    SERVE_PUBLIC_PORT: String(publicPort),
    SERVE_ADMIN_HOST: '127.0.0.1',
    SERVE_ADMIN_PORT: String(adminPort),
    LOG_LEVEL: 'error',
  };
  execFileSync(binary, ['migrate', 'sql', 'up', '-e', '--yes'], { env, stdio: 'ignore' });
  let child: ChildProcess | undefined;
  const close = async () => {
    if (child && child.exitCode === null && child.signalCode === null) {
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    child = spawn(binary, ['serve', 'all', '--dev'], { env, stdio: ['ignore', 'ignore', 'inherit'] });
    const deadline = Date.now() + 30_000;
    while ((await fetch(`${adminUrl}/health/ready`).catch(() => undefined))?.status !== 200) {
      if (Date.now() > deadline || child.exitCode !== null) throw new Error('Hydra did not become ready');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const secret = randomBytes(24).toString('base64url');
    const created = await fetch(`${adminUrl}/admin/clients`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        client_secret: secret,
        grant_types: ['client_credentials'],
        scope: 'read',
        token_endpoint_auth_method: 'client_secret_basic',
      }),
    });
    const client = (await created.json()) as { client_id?: string };
    if (created.status !== 201 || !client.client_id)
      throw new Error(`Hydra: client not created: ${created.status} ${JSON.stringify(client)}`);
    const machine = basic(client.client_id, secret);
    const token = await fetch(`${url}/oauth2/token`, {
      method: 'POST',
      headers: { ...FORM, authorization: machine },
      body: 'grant_type=client_credentials&scope=read',
    });
    const issued = (await token.json()) as { access_token?: string };
    if (token.status !== 200 || !issued.access_token)
      throw new Error(`Hydra: no token: ${token.status} ${JSON.stringify(issued)}`);
    return { url, adminUrl, machine, validToken: issued.access_token, pid: child.pid, close };
  } catch (error) {
    await close();
    throw error;
  }
}
