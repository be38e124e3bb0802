import { execFile } from 'node:child_process';
import { createHash, X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** A certificate and its key, PEM, as a TLS client presents them. */
export interface IssuedCertificate {
  cert: string;
  key: string;
  /** RFC 8705 §3.1 `x5t#S256`: the base64url SHA-256 of the DER. */
  thumbprint: string;
}

/**
 * A throwaway PKI made with the openssl CLI (Node's crypto cannot write X.509 certificates): a
 * CA, the server's certificate for 127.0.0.1 that CA issued, and client certificates on demand,
 * each valid for a day, in a directory of their own that `close` removes.
 */
export class TestPki {
  readonly dir = mkdtempSync(join(tmpdir(), 'arbiter-pki-'));
  readonly caFile = join(this.dir, 'ca.pem');
  readonly caPem: () => string = () => readFileSync(this.caFile, 'utf8');
  private readonly caKey = join(this.dir, 'ca.key');

  static async create(): Promise<TestPki & { server: { certFile: string; keyFile: string } }> {
    const pki = new TestPki();
    await openssl(
      ['req', '-x509', ...EC_KEY, '-keyout', pki.caKey, '-out', pki.caFile, '-subj', '/CN=Arbiter Test CA'],
      ['basicConstraints=critical,CA:TRUE', 'keyUsage=critical,keyCertSign'],
    );
    // Both names of the one listener: RFC 8705 §5 aliases are tested as `localhost` (test/oauth/mtls.test.ts).
    await pki.write('server', '/CN=127.0.0.1', { san: 'IP:127.0.0.1,DNS:localhost' });
    return Object.assign(pki, {
      server: { certFile: join(pki.dir, 'server.pem'), keyFile: join(pki.dir, 'server.key') },
    });
  }

  /** A client certificate this PKI's CA issued (or, `selfSigned`, one signed by its own key). */
  async issue(name: string, subject: string, options: { san?: string; selfSigned?: boolean } = {}) {
    await this.write(name, subject, options);
    const cert = readFileSync(join(this.dir, `${name}.pem`), 'utf8');
    return {
      cert,
      key: readFileSync(join(this.dir, `${name}.key`), 'utf8'),
      thumbprint: createHash('sha256').update(new X509Certificate(cert).raw).digest('base64url'),
    } satisfies IssuedCertificate;
  }

  close(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }

  private async write(
    name: string,
    subject: string,
    { san, selfSigned = false }: { san?: string; selfSigned?: boolean },
  ) {
    const signer = selfSigned ? [] : ['-CA', this.caFile, '-CAkey', this.caKey];
    const out = ['-keyout', join(this.dir, `${name}.key`), '-out', join(this.dir, `${name}.pem`)];
    await openssl(
      ['req', '-x509', ...EC_KEY, ...signer, ...out, '-subj', subject],
      san ? [`subjectAltName=${san}`] : [],
    );
  }
}

const EC_KEY = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1'];

async function openssl(args: string[], extensions: string[]): Promise<void> {
  await run('openssl', [...args, ...extensions.flatMap((extension) => ['-addext', extension])]);
}
