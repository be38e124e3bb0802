import { readFileSync } from 'node:fs';
import { X509Certificate } from 'node:crypto';
import type { ServerOptions } from 'node:https';
import { ConfigError, type Config } from '../config/index.js';

type TlsSettings = Pick<Config, 'tlsCertFile' | 'tlsKeyFile' | 'tlsClientCaFile'>;

/**
 * The public listener's TLS (TLS_CERT_FILE), or null for plain HTTP. Every client is asked for a
 * certificate and none is required (`rejectUnauthorized: false`): clients without one still sign
 * in, and one that presents a certificate no CA of TLS_CLIENT_CA_FILE issued may still use it for
 * self_signed_tls_client_auth and certificate-bound tokens (RFC 8705 §2.2, §3). Whether a CA
 * issued it is the socket's `authorized` (src/oauth/mtls).
 */
export function tlsServerOptions(config: TlsSettings): ServerOptions | null {
  if (!config.tlsCertFile || !config.tlsKeyFile) return null;
  return {
    cert: readPem(config.tlsCertFile, 'TLS_CERT_FILE'),
    key: readPem(config.tlsKeyFile, 'TLS_KEY_FILE'),
    // Without a client CA, Node would check clients' certificates against the public roots: no CA is then trusted.
    ca: config.tlsClientCaFile ? readPem(config.tlsClientCaFile, 'TLS_CLIENT_CA_FILE') : [],
    requestCert: true,
    rejectUnauthorized: false,
  };
}

/** The CA certificates of TLS_CLIENT_CA_FILE (none when unset), for certificates a proxy forwards. */
export function clientCaCertificates(config: Pick<Config, 'tlsClientCaFile'>): X509Certificate[] {
  if (!config.tlsClientCaFile) return [];
  const pem = readPem(config.tlsClientCaFile, 'TLS_CLIENT_CA_FILE');
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  try {
    if (blocks.length === 0) throw new Error('no PEM certificate in it');
    return blocks.map((block) => new X509Certificate(block));
  } catch (error) {
    throw new ConfigError(`invalid configuration: TLS_CLIENT_CA_FILE: ${(error as Error).message}`);
  }
}

function readPem(file: string, setting: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (error) {
    throw new ConfigError(`invalid configuration: ${setting} ${file} cannot be read (${(error as Error).message})`);
  }
}
