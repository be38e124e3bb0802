import {
  createCipheriv,
  createDecipheriv,
  createHmac,
  hkdfSync,
  randomBytes,
  timingSafeEqual,
  type DecipherGCM,
} from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { open, rename, rm, stat } from 'node:fs/promises';
import { pipeline } from 'node:stream/promises';

/** The first line of a sealed file: format, then its salt, IV and key check (base64url), space-separated. */
const FORMAT = 'arbiter-sealed-file-v1';
const HEADER_MAX_BYTES = 256;
const TAG_BYTES = 16;
const PRIVATE_FILE_MODE = 0o600;

/** A sealed file that cannot be opened: not one, sealed with another key, or changed since it was sealed. */
export class SealedFileError extends Error {}

/**
 * Seals `plainFile` into `sealedFile` (written owner-only, whole or not at all): AES-256-GCM under a
 * key derived (HKDF-SHA256, a salt per file) from `secretsKey`, SERVICE_SECRETS_KEY as the Sealer
 * reads it; the header is authenticated with the contents, so that no byte can change unnoticed.
 * Streamed, so a store of any size is sealed in bounded memory.
 */
export async function sealFile(plainFile: string, sealedFile: string, secretsKey: string): Promise<void> {
  const salt = randomBytes(16);
  const iv = randomBytes(12);
  const key = fileKey(secretsKey, salt);
  const header = Buffer.from(`${[FORMAT, salt, iv, keyCheck(key)].map(text).join(' ')}\n`);
  const cipher = createCipheriv('aes-256-gcm', key, iv).setAAD(header);
  await writeWhole(sealedFile, async (output) => {
    await pipeline(
      createReadStream(plainFile),
      async function* (source: AsyncIterable<Buffer>) {
        yield header;
        for await (const chunk of source) yield cipher.update(chunk);
        yield cipher.final();
        yield cipher.getAuthTag();
      },
      output,
    );
  });
}

/**
 * Opens `sealedFile` (sealed by sealFile with one of `secretsKeys`) into `plainFile`, written
 * owner-only. Throws SealedFileError, and leaves no `plainFile`, when the seal does not check.
 */
export async function openSealedFile(sealedFile: string, plainFile: string, secretsKeys: string[]): Promise<void> {
  const { header, salt, iv, check } = await readHeader(sealedFile);
  const key = secretsKeys
    .map((secretsKey) => fileKey(secretsKey, salt))
    .find((each) => sameBytes(keyCheck(each), check));
  if (!key)
    throw new SealedFileError(
      `${sealedFile} was sealed with another SERVICE_SECRETS_KEY: set SERVICE_SECRETS_KEY (or SERVICE_SECRETS_KEY_PREVIOUS) to the key it was made with`,
    );
  const { size } = await stat(sealedFile);
  if (size <= header.length + TAG_BYTES) throw changedSince(sealedFile);
  const decipher = createDecipheriv('aes-256-gcm', key, iv).setAAD(header);
  decipher.setAuthTag(await readRange(sealedFile, size - TAG_BYTES, TAG_BYTES));
  await writeWhole(plainFile, (output) =>
    pipeline(
      createReadStream(sealedFile, { start: header.length, end: size - TAG_BYTES - 1 }),
      async function* (source: AsyncIterable<Buffer>) {
        for await (const chunk of source) yield decipher.update(chunk);
        yield finalOf(decipher, sealedFile);
      },
      output,
    ),
  );
}

/** The key of one sealed file: HKDF-SHA256 of SERVICE_SECRETS_KEY with the file's salt. */
function fileKey(secretsKey: string, salt: Buffer): Buffer {
  return Buffer.from(hkdfSync('sha256', Buffer.from(secretsKey, 'base64url'), salt, 'arbiter sealed file', 32));
}

/** Says which of the configured keys sealed a file (and that none did) without a pass over its contents. */
function keyCheck(key: Buffer): Buffer {
  return createHmac('sha256', key).update('key check').digest().subarray(0, 16);
}

async function readHeader(file: string): Promise<{ header: Buffer; salt: Buffer; iv: Buffer; check: Buffer }> {
  const head = await readRange(file, 0, HEADER_MAX_BYTES);
  const end = head.indexOf('\n');
  const [format, ...parts] = (end > 0 ? head.subarray(0, end).toString('latin1') : '').split(' ');
  if (format !== FORMAT || parts.length !== 3)
    throw new SealedFileError(`${file} is not a sealed Arbiter backup (or its first line was changed)`);
  const [salt, iv, check] = parts.map((part) => Buffer.from(part, 'base64url'));
  return { header: head.subarray(0, end + 1), salt: salt!, iv: iv!, check: check! }; // three parts: checked above
}

/** Up to `length` bytes of `file` from `position`. */
async function readRange(file: string, position: number, length: number): Promise<Buffer> {
  const handle = await open(file, 'r');
  try {
    const buffer = Buffer.alloc(length);
    const { bytesRead } = await handle.read(buffer, 0, length, position);
    return buffer.subarray(0, bytesRead);
  } finally {
    await handle.close();
  }
}

function finalOf(decipher: DecipherGCM, file: string): Buffer {
  try {
    return decipher.final();
  } catch {
    throw changedSince(file);
  }
}

function changedSince(file: string): SealedFileError {
  return new SealedFileError(`${file} does not match its seal: it was changed or damaged since it was made`);
}

/**
 * `write`s into a new owner-only file beside `path`, flushed to disk, that becomes `path` only
 * when complete: a failure leaves neither a partial file nor one that a later step would trust.
 */
async function writeWhole(path: string, write: (output: NodeJS.WritableStream) => Promise<void>): Promise<void> {
  const partial = `${path}.${randomBytes(6).toString('hex')}.partial`;
  try {
    await write(createWriteStream(partial, { flags: 'wx', mode: PRIVATE_FILE_MODE }));
    const handle = await open(partial, 'r');
    await handle.sync().finally(() => handle.close());
    await rename(partial, path);
  } finally {
    await rm(partial, { force: true });
  }
}

function sameBytes(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}

function text(part: string | Buffer): string {
  return typeof part === 'string' ? part : part.toString('base64url');
}
