/**
 * `npx arbiter <command>` (scripts/arbiter.sh): what an operator does besides the Admin API, on the
 * store STORE_URL names (and CONFIG_FILE, as the server reads its configuration), through the same
 * code the server runs: records through their repository (src/records), the store's own migrations.
 * Every command prints one JSON object on success; a failure is one line on stderr and exit 1
 * (exit 2 for a command line that is wrong).
 */
import { randomBytes } from 'node:crypto';
import { mkdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { COLLECTIONS, storeSpecOf } from '../catalog/index.js';
import { documentInBackup, openArbiterStore, restoreArbiterStore } from '../collections.js';
import { ConfigError, loadConfig, type Config } from '../config/index.js';
import { MIGRATIONS, SCHEMA_VERSION } from '../migrations.js';
import {
  DEFAULT_TENANT,
  migrate,
  SCHEMA_VERSION_DOCUMENT,
  SchemaVersionError,
  schemaVersion,
  Sealer,
  SEALING_KEYS_COLLECTION,
  versionOf,
  type Store,
} from '../store/index.js';
import { openSealedFile, sealFile } from '../store/sealed-file.js';
import { isTenantId, storeTenant, TENANTS_COLLECTION, TenantRegistry } from '../tenancy/index.js';

const USAGE = `usage: arbiter <command> [options]

  hash-secret [-]                  the BCrypt hash the Admin API takes as clientSecret: of the
                                   secret on standard input with -, else of a new random secret
                                   (both are printed)
  create-client <client-id> [--scopes a,b] [--grant-types client_credentials,…] [--tenant t]
                                   a confidential client (client_secret_basic) with a generated
                                   secret, printed once; the same checks as POST /admin/api/clients
  migrate                          brings the store to this release's schema version (${SCHEMA_VERSION})
  schema-version                   the store's schema version and this release's
  rotate-signing-key [--tenant t] [--promote]
                                   one step of signing-key rotation of a tenant (default: the default
                                   tenant): publish a next key; with --promote, once relying parties
                                   have fetched it, make it the signing key and retire the old one
  rotate-secrets-key               seals every stored secret again with SERVICE_SECRETS_KEY (the old
                                   key in SERVICE_SECRETS_KEY_PREVIOUS), then forgets the old keys
  backup <file>                    an online backup of a SQLite or PostgreSQL store into <file> (the
                                   servers may run), sealed with SERVICE_SECRETS_KEY
  restore <file>                   replaces a SQLite or PostgreSQL store with a backup whose seal
                                   checks (stop every server first)

STORE_URL, CONFIG_FILE and SERVICE_SECRETS_KEY are read as the server reads them.`;

class UsageError extends Error {}

/**
 * The OAuth side (client records and secrets, signing keys), loaded by the commands that need it:
 * it brings oidc-provider and most of the server, a third of a second that migrate,
 * schema-version, backup and restore do without.
 */
const oauth = () => import('../oauth/index.js');
const signals = () => import('../signals/index.js');

type Command = (args: string[], config: Config) => Promise<Record<string, unknown>>;

const COMMANDS: Record<string, Command> = {
  'hash-secret': hashSecret,
  'create-client': createClient,
  migrate: (_args, config) => withStore(config, async (store) => migrate(store, MIGRATIONS)),
  'schema-version': (_args, config) =>
    withStore(config, async (store) => ({ store: await schemaVersion(store), release: SCHEMA_VERSION }), false),
  'rotate-signing-key': rotateSigningKeyOf,
  'rotate-secrets-key': (_args, config) => withStore(config, async (store) => resealEverything(store, config)),
  backup,
  restore,
};

/** Leeway for the clocks of those who verify what a retired key signed. */
const CLOCK_SKEW_SECONDS = 60;

/** One rotation step of one tenant's signing keys (each tenant has its own; --tenant names it, else the default tenant). */
async function rotateSigningKeyOf(args: string[], config: Config): Promise<Record<string, unknown>> {
  const { positionals, values } = parseArgs({
    args,
    allowPositionals: true,
    options: { tenant: { type: 'string' }, promote: { type: 'boolean' } },
  });
  if (positionals.length) throw new UsageError('rotate-signing-key takes no arguments but --tenant and --promote');
  const tenant = values.tenant ?? null;
  if (tenant !== null && !isTenantId(tenant)) throw new UsageError(`--tenant ${tenant} is no tenant id`);
  return withStore(config, async (store) => {
    if (tenant !== null && !(await new TenantRegistry(store, config.tenants).exists(tenant)))
      throw new Error(`no tenant ${tenant} on this store`);
    const { rotateSigningKey } = await oauth();
    const step = await rotateSigningKey(store, await sealerFor(store, config), {
      tenant: storeTenant(tenant),
      promote: values.promote === true,
      // Anything the old key signed (ID tokens, at most their lifetime) verifies until then.
      retireAfterSeconds: Math.max(config.ttl.idTokenSeconds, config.ttl.accessTokenSeconds) + CLOCK_SKEW_SECONDS,
    });
    return { tenant, ...step };
  });
}

function sealerFor(store: Store, config: Config): Promise<Sealer> {
  return Sealer.open(store, config.secretsKey, config.secretsKeyPrevious);
}

/**
 * Every sealed value in the store sealed again with SERVICE_SECRETS_KEY: the provider's secrets
 * (signing and cookie keys, every tenant's) and each collection's sealed fields in every tenant.
 * Then the store's own development key, if any, is deleted: nothing is sealed with it any more, and a copy of the
 * store must not hold a key that opens anything.
 */
async function resealEverything(store: Store, config: Config): Promise<Record<string, unknown>> {
  if (!config.secretsKey)
    throw new Error('set SERVICE_SECRETS_KEY to the new key (and SERVICE_SECRETS_KEY_PREVIOUS to the old one)');
  const sealer = await sealerFor(store, config);
  const tenants = [
    DEFAULT_TENANT,
    ...(await store.collection(TENANTS_COLLECTION, DEFAULT_TENANT).find()).map((tenant) => String(tenant.id)),
  ];
  const { resealProviderSecrets } = await oauth();
  const providerSecrets = await resealProviderSecrets(store, sealer);
  // Configured tenants (TENANTS) are in the registry only once the Admin API has read it: theirs too.
  const everyTenant = [...new Set([...tenants, ...config.tenants])];
  let tenantKeys = 0;
  for (const tenant of everyTenant)
    if (tenant !== DEFAULT_TENANT && (await resealProviderSecrets(store, sealer, tenant))) tenantKeys += 1;
  let fields = 0;
  for (const definition of COLLECTIONS.filter((each) => each.sealedFields?.length)) {
    for (const tenant of everyTenant) {
      const records = store.collection(storeSpecOf(definition), tenant);
      for (const record of await records.find()) {
        const resealed = Object.fromEntries(
          definition
            .sealedFields!.filter((field) => typeof record[field] === 'string')
            .map((field) => [field, sealer.reseal(record[field] as string)]),
        );
        if (Object.keys(resealed).length === 0) continue;
        await records.update(record.id, resealed);
        fields += Object.keys(resealed).length;
      }
    }
  }
  const { resealStreamCredentials } = await signals();
  let streamCredentials = 0;
  for (const tenant of everyTenant) streamCredentials += await resealStreamCredentials(store, sealer, tenant);
  const developmentKeyDeleted = await store.collection(SEALING_KEYS_COLLECTION, DEFAULT_TENANT).delete('development');
  return {
    providerSecrets,
    tenantKeys,
    sealedFields: fields,
    streamCredentials,
    tenants: tenants.length,
    developmentKeyDeleted,
  };
}

/**
 * A secret is read from standard input (`hash-secret -`), never taken as an argument: a command
 * line is readable by every local user (ps, /proc/<pid>/cmdline) while the command runs.
 */
async function hashSecret([given, ...rest]: string[]): Promise<Record<string, unknown>> {
  if (rest.length || (given !== undefined && given !== '-'))
    throw new UsageError(
      'hash-secret takes its secret on standard input (hash-secret -), not as an argument: every local user can read a command line',
    );
  const secret = given === '-' ? await secretFromStandardInput() : newSecret();
  const { hashClientSecret } = await oauth();
  return { ...(given ? {} : { secret }), hash: await hashClientSecret(secret) };
}

/** The first line of standard input, without its line end; an empty one is refused. */
async function secretFromStandardInput(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  const secret = Buffer.concat(chunks).toString('utf8').split(/\r?\n/)[0] ?? '';
  if (secret === '') throw new UsageError('hash-secret -: standard input holds no secret');
  return secret;
}

async function createClient(args: string[], config: Config): Promise<Record<string, unknown>> {
  const { positionals, values } = parseArgs({
    args,
    allowPositionals: true,
    options: { scopes: { type: 'string' }, 'grant-types': { type: 'string' }, tenant: { type: 'string' } },
  });
  if (positionals.length !== 1) throw new UsageError('create-client takes one client id');
  const body = {
    clientId: positionals[0],
    clientType: 'confidential',
    tokenEndpointAuthMethod: 'client_secret_basic',
    // Generated by the server, so kept as a keyed digest (checked in microseconds), not BCrypt.
    generateClientSecret: true,
    grantTypes: list(values['grant-types']) ?? ['client_credentials'],
    ...(values.scopes !== undefined ? { scopes: list(values.scopes) } : {}),
  };
  return withStore(config, async (store) => {
    const { clientRepository } = await oauth();
    const created = await clientRepository(store, await sealerFor(store, config)).create(values.tenant ?? null, body);
    // The repository shows a generated secret this once, beside the record's fields.
    const secret = (created as Record<string, unknown>).generatedClientSecret;
    return { clientId: created.clientId, clientSecret: secret, tenant: values.tenant ?? null, id: created.id };
  });
}

/**
 * A sealed online backup: SQLite's backup API (PostgreSQL: one REPEATABLE READ transaction)
 * copies the store into an owner-only scratch file beside `file`, which is then sealed into `file` (src/store/sealed-file.ts) and removed. Sealing
 * needs SERVICE_SECRETS_KEY, in development too: without it the only key would be the store's
 * development key, which the backup itself holds, so its seal would prove nothing.
 */
async function backup([file, ...rest]: string[], config: Config): Promise<Record<string, unknown>> {
  if (!file || rest.length) throw new UsageError('backup takes one file');
  if (!config.secretsKey)
    throw new Error(
      'SERVICE_SECRETS_KEY is not set: a backup is sealed with a key derived from it, and restored only with it. ' +
        'Set it (32 random bytes, base64url) as the server has it, or to a new key kept for backups alone',
    );
  const secretsKey = config.secretsKey;
  const destination = resolve(file);
  return withStore(config, async (store) => {
    if (!store.backup)
      throw new Error(
        'this store has no online backup here: back a MongoDB store up with mongodump (docs/operations.md, Backups)',
      );
    const backup = store.backup.bind(store);
    await withScratchFile(dirname(destination), async (plain) => {
      await backup(plain);
      await sealFile(plain, destination, secretsKey);
    });
    return { backup: destination, sealed: true, schemaVersion: await schemaVersion(store) };
  });
}

/**
 * Checks the backup's seal (SERVICE_SECRETS_KEY or SERVICE_SECRETS_KEY_PREVIOUS) while opening it
 * into an owner-only scratch file beside the store, and only then replaces the store with it: a
 * backup changed since it was made (an Admin key digest planted in it, …) leaves the store untouched.
 */
async function restore([file, ...rest]: string[], config: Config): Promise<Record<string, unknown>> {
  if (!file || rest.length) throw new UsageError('restore takes one file');
  const keys = [config.secretsKey, config.secretsKeyPrevious].filter((key): key is string => key !== null);
  if (keys.length === 0)
    throw new Error('SERVICE_SECRETS_KEY is not set: set it to the key the backup was sealed with to restore it');
  const from = resolve(file);
  const target = await withScratchFile(scratchDirectoryFor(config.storeUrl), async (plain) => {
    await openSealedFile(from, plain, keys);
    // One of a newer release is refused before the store is touched: this release could not serve it.
    const version = versionOf(await documentInBackup(config.storeUrl, plain, SCHEMA_VERSION_DOCUMENT));
    if (version > SCHEMA_VERSION)
      throw new SchemaVersionError(
        `the backup holds schema version ${version}, newer than this Arbiter's ${SCHEMA_VERSION}: restore it with the release that wrote it (the store is unchanged)`,
      );
    return restoreArbiterStore(config.storeUrl, plain);
  });
  // A backup of an older release is brought up to date.
  const schema = await withStore(config, (store) => migrate(store, MIGRATIONS));
  return { restored: target, from, schema };
}

/**
 * `work` with the path of a scratch file (not created) in `directory` (made, owner-only, when
 * missing: a restore onto a new machine), removed afterwards whatever happens.
 */
async function withScratchFile<T>(directory: string, work: (path: string) => Promise<T>): Promise<T> {
  await mkdir(directory, { recursive: true, mode: 0o700 });
  const scratch = join(directory, `.arbiter-scratch-${randomBytes(6).toString('hex')}`);
  try {
    return await work(scratch);
  } finally {
    await Promise.all(['', '-journal', '-wal', '-shm'].map((suffix) => rm(`${scratch}${suffix}`, { force: true })));
  }
}

/** Where a restore opens a backup before it replaces the store: beside a SQLite store's file, on its disk. */
function scratchDirectoryFor(storeUrl: string): string {
  const location = storeUrl.startsWith('sqlite:') ? storeUrl.slice('sqlite:'.length) : '';
  return location && location !== ':memory:' ? dirname(resolve(location)) : tmpdir();
}

/** Opens the store (migrated first unless `migrated` is false), runs `work`, closes it. */
async function withStore<T>(config: Config, work: (store: Store) => Promise<T>, migrated = true): Promise<T> {
  const store = await openArbiterStore(config.storeUrl, { sqliteLockWaitMs: config.storeSqliteLockWaitMs });
  try {
    if (migrated) await migrate(store, MIGRATIONS);
    return await work(store);
  } finally {
    await store.close();
  }
}

function newSecret(): string {
  return randomBytes(32).toString('base64url');
}

function list(value: string | undefined): string[] | undefined {
  return value
    ?.split(',')
    .map((item) => item.trim())
    .filter(Boolean);
}

async function main(argv: string[]): Promise<number> {
  const [name, ...args] = argv;
  const command = name ? COMMANDS[name] : undefined;
  if (!command) {
    process.stderr.write(
      `${name && name !== 'help' && name !== '--help' ? `unknown command ${name}\n` : ''}${USAGE}\n`,
    );
    return name === 'help' || name === '--help' ? 0 : 2;
  }
  try {
    const result = await command(args, loadConfig());
    process.stdout.write(`${JSON.stringify(result)}\n`);
    return 0;
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    process.stderr.write(`arbiter ${name}: ${message}\n`);
    return error instanceof UsageError || (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS') ? 2 : 1;
  }
}

process.exitCode = await main(process.argv.slice(2)).catch((error: unknown) => {
  process.stderr.write(`${error instanceof ConfigError ? error.message : String(error)}\n`);
  return 1;
});
