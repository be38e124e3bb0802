import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { expect } from 'chai';
import { projectPath } from '../../src/config/index.js';
import { SERVER_NODE_FLAGS } from '../../src/workers/node-flags.js';
import { eventually } from '../support/oauth.js';
import { freePort } from '../support/server.js';

const dockerfile = readFileSync(projectPath('Dockerfile'), 'utf8');
const argument = (name: string) => new RegExp(`^ARG ${name}=(\\S+)$`, 'm').exec(dockerfile)?.[1];
const scriptSetting = (script: string, name: string) =>
  new RegExp(`^${name}="([^"]+)"$`, 'm').exec(readFileSync(projectPath('scripts', script), 'utf8'))?.[1];

/** The container image (Dockerfile): checked as text everywhere, built and started where a container engine runs. */
describe('Container image', function () {
  it('uses the Node.js and OPA versions the scripts install, is built by scripts/build.sh, ships the build without the sources, copies only files that exist, and runs as a non-root user', function () {
    expect(argument('NODE_VERSION'), 'scripts/runtime.sh NODE_LTS_VERSION').to.equal(
      scriptSetting('runtime.sh', 'NODE_LTS_VERSION'),
    );
    expect(argument('OPA_VERSION'), 'scripts/install-opa.sh OPA_VERSION').to.equal(
      scriptSetting('install-opa.sh', 'OPA_VERSION'),
    );
    const copied = [...dockerfile.matchAll(/^COPY (?!--from)(.+) \S+$/gm)].flatMap((match) => match[1]!.split(' '));
    expect(copied).to.include.members(['package.json', 'config', 'policies', 'src']);
    for (const source of copied) expect(existsSync(projectPath(source)), `COPY ${source}`).to.equal(true);
    const finalStage = dockerfile.slice(dockerfile.lastIndexOf('\nFROM '));
    expect(finalStage).to.match(/^USER node$/m);
    // Built by the build script, not by steps of its own; the image holds the build, not the sources.
    expect(dockerfile).to.match(/^RUN bash scripts\/build\.sh( |$)/m);
    expect(dockerfile.replace(/^#.*$/gm, ''), 'no step of scripts/build.sh repeated').to.not.match(
      /\btsc\b|esbuild|build-console/,
    );
    expect(finalStage).to.match(/^COPY --from=build \/app\/dist \.\/dist$/m);
    expect(finalStage, 'no sources in the image').to.not.match(
      /^COPY (?:--from=build \/app\/)?(?:src|adapters|scripts)\/? /m,
    );
    // The server's Node.js options (src/workers/node-flags.ts) between the source maps and the entry point.
    const command = ['node', '--enable-source-maps', ...SERVER_NODE_FLAGS, 'dist/src/main.js'];
    expect(finalStage).to.contain(`\nCMD ${JSON.stringify(command).replaceAll(',', ', ')}\n`);
    const ignored = readFileSync(projectPath('.dockerignore'), 'utf8').split('\n');
    expect(ignored, 'no local install, data or build enters the context').to.include.members([
      'node_modules',
      '.bin',
      'data',
      'dist',
    ]);
  });

  it('builds, starts as a non-root user and becomes ready (where a container engine runs)', async function () {
    if (spawnSync('docker', ['info'], { stdio: 'ignore' }).status !== 0) {
      console.log('      (skipped: no container engine answers `docker info` on this machine)');
      this.skip();
    }
    this.timeout(30 * 60_000);
    const tag = `arbiter-test:${randomBytes(4).toString('hex')}`;
    execFileSync('docker', ['build', '-t', tag, projectPath()], { stdio: 'inherit' });
    const port = await freePort();
    const container = execFileSync(
      'docker',
      [
        'run',
        '-d',
        '--rm',
        '-p',
        `127.0.0.1:${port}:9000`,
        '-e',
        `SERVICE_ADMIN_API_KEY=${randomBytes(24).toString('base64url')}`,
        '-e',
        `SERVICE_SECRETS_KEY=${randomBytes(32).toString('base64url')}`,
        '-e',
        `ISSUER=http://127.0.0.1:${port}`,
        tag,
      ],
      { encoding: 'utf8' },
    ).trim();
    try {
      await eventually(
        async () => (await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined))?.status === 200,
        60_000,
      );
      expect(execFileSync('docker', ['exec', container, 'id', '-u'], { encoding: 'utf8' }).trim()).to.not.equal('0');
      // The console as built into dist/console/ (the image has no sources to build it from).
      expect((await fetch(`http://127.0.0.1:${port}/admin/assets/console.js`)).status).to.equal(200);
    } finally {
      spawnSync('docker', ['rm', '-f', container], { stdio: 'ignore' });
      spawnSync('docker', ['rmi', tag], { stdio: 'ignore' });
    }
  });
});
