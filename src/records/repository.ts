import { randomBytes, randomUUID } from 'node:crypto';
import {
  ConflictError,
  storageDigest,
  type Sealer,
  type Store,
  type StoredDoc,
  type TenantCollection,
  type TextSearch,
} from '../store/index.js';
import { HttpError, badRequest, notFound } from '../http/errors.js';
import { assertValid } from '../http/validation.js';
import { registerTenant, storeTenant } from '../tenancy/index.js';
import {
  definitionOfStore,
  presentedForm,
  publicKeySetProblem,
  registrableRedirectUriProblem,
  storedForm,
  storeSpecOf,
  webUriProblem,
  type CollectionDefinition,
} from '../catalog/index.js';

/** A record of a shared collection as stored: what every collection's records share. */
export type StoredRecord = StoredDoc & { id: number; tenantId: string | null; createdAt?: string; updatedAt?: string };

/**
 * Checks a record beyond its schema (rule syntax, payload JSON); returns an error message or null.
 * A message that starts with a field name (`path must …`) is about that field; any other is
 * about the collection's checked field (see CHECKED_FIELD).
 */
export type RecordCheck = (
  record: Record<string, unknown>,
  context: { tenantId: string | null; existing?: StoredRecord },
) => Promise<string | null>;

/** Checks that a record may be deleted (a policy rule the bundle cannot do without); returns an error message or null. */
export type RemovalCheck = (existing: StoredRecord, context: { tenantId: string | null }) => Promise<string | null>;

/** The versions a collection keeps of its records (the Admin API's policy history, src/admin/history.ts). */
export interface RecordJournal {
  recorded(
    tenantId: string | null,
    action: 'create' | 'replace' | 'delete' | 'rollback',
    before: StoredRecord | null,
    after: StoredRecord | null,
    rolledBackTo?: number,
  ): Promise<void>;
}

/**
 * How a collection's hashed secret (a client's, CollectionDefinition.hashedSecret) is hashed and
 * generated: the protocol's own functions (src/oauth/clients), given by whoever opens the repository.
 */
export interface SecretHashing {
  /** A secret an operator chose (BCrypt). */
  hash(secret: string): Promise<string>;
  /** A new secret the server makes (256 bits). */
  generate(): string;
  /** How a generated secret is kept (a keyed digest: it is random, so a slow hash adds nothing). */
  digestGenerated(secret: string): string;
  /** True for a value already in a kept form (a BCrypt hash, a keyed digest), written back as it is. */
  isKept(value: string): boolean;
}

/** What a server-side writer (dynamic registration, a client ID metadata document) asks of a write beyond the Admin API's. */
export interface WriteOptions {
  /** The store hides and purges the record after this instant (epoch ms): a metadata document's client is a cache entry. */
  expiresAt?: number;
  /**
   * false: a secret field the body leaves out is dropped rather than kept (see `keptSecrets`): the
   * writer gives every secret the record keeps (an RFC 7592 update that moves a client to `none`).
   */
  keepOmittedSecrets?: boolean;
}

/** A record as written, and what the writer is shown this once (a generated secret, an issued token), never stored. */
export interface Written<T> {
  record: T;
  shownOnce: Record<string, string>;
}

function expiryOf(options: WriteOptions): { expiresAt?: number } {
  return options.expiresAt === undefined ? {} : { expiresAt: options.expiresAt };
}

/** What a collection does beyond the generic rules: its checks, the history it keeps, how it hashes secrets. */
export interface RecordExtras {
  check?: RecordCheck;
  checkRemoval?: RemovalCheck;
  history?: RecordJournal;
  secrets?: SecretHashing;
  /** Seals the collection's sealedFields (an identity provider's client secret). */
  sealer?: Sealer;
}

/** The field whose value a collection's check judges: a rule's source, a data entry's JSON. */
const CHECKED_FIELD: Record<string, string> = { 'policy-rules': 'content', 'policy-data': 'payload' };

/**
 * The one repository of a shared collection: create/read/replace/delete tenant by tenant, for the
 * Admin API, the CLI, dynamic registration and client ID metadata documents alike. Every write is
 * validated by the collection's JSON Schema (src/catalog) and the rules its definition names:
 * defaults, references, unique keys, registrable URIs, hashed and sealed secrets, secrets kept
 * out of what is shown. `T` is the collection's record type, derived from the same schema.
 */
export class RecordRepository<T extends StoredRecord = StoredRecord> {
  private readonly check: RecordCheck;

  constructor(
    private readonly store: Store,
    readonly definition: CollectionDefinition,
    private readonly extras: RecordExtras = {},
  ) {
    // A secret must never be stored as given for want of a hasher, nor in clear for want of a sealer.
    if (definition.hashedSecret && !extras.secrets) throw new Error(`${definition.path} needs its secret hashing`);
    if (definition.sealedFields?.length && !extras.sealer) throw new Error(`${definition.path} needs a sealer`);
    this.check = extras.check ?? (async () => null);
  }

  collection(tenantId: string | null): TenantCollection<T> {
    return this.store.collection<T>(storeSpecOf(this.definition), storeTenant(tenantId));
  }

  /** One page of the tenant's records (those `search` finds, when given) by ascending id. */
  async list(tenantId: string | null, page: { offset: number; limit: number }, search?: TextSearch): Promise<T[]> {
    return this.collection(tenantId).find(
      {},
      { sort: { field: 'id', direction: 'asc' }, skip: page.offset, limit: page.limit, search },
    );
  }

  /** How many records the tenant has (that `search` finds, when given), counting no further than `atMost`. */
  count(tenantId: string | null, search?: TextSearch, atMost?: number): Promise<number> {
    return this.collection(tenantId).count({}, search, atMost);
  }

  async find(tenantId: string | null, key: string): Promise<T | null> {
    const records = this.collection(tenantId);
    if (this.definition.pathKey !== 'id') return records.findOne({ [this.definition.pathKey]: key });
    return /^\d{1,15}$/.test(key) ? records.get(Number(key)) : null;
  }

  async get(tenantId: string | null, key: string): Promise<T> {
    const record = await this.find(tenantId, key);
    if (!record)
      throw notFound(
        `no ${this.definition.path} record ${JSON.stringify(key)}${tenantId ? ` in tenant ${tenantId}` : ''}`,
      );
    return record;
  }

  /** Creates the record; the answer shows what is shown only once (a generated secret, an issued token) beside its fields. */
  async create(tenantId: string | null, body: unknown): Promise<T> {
    const { record, shownOnce } = await this.createRecord(tenantId, body);
    return { ...record, ...shownOnce };
  }

  /** Creates the record: the record as stored, and apart from it what is shown this once. */
  async createRecord(tenantId: string | null, body: unknown, options: WriteOptions = {}): Promise<Written<T>> {
    const fields = await this.validate(tenantId, body);
    const generated = await this.hashSecret(fields);
    const now = new Date().toISOString();
    const id = await this.store.nextSequence(this.definition.store);
    await registerTenant(this.store, tenantId);
    const issued = this.issueToken(fields);
    const created = await this.write(() =>
      this.collection(tenantId).insert(
        this.storedForm({ ...fields, id, tenantId, createdAt: now, updatedAt: now, ...expiryOf(options) }),
      ),
    );
    await this.extras.history?.recorded(tenantId, 'create', null, this.historyForm(created));
    return { record: created, shownOnce: { ...issued, ...generated } };
  }

  /**
   * The collection's hashed secret (a client's): a clear one replaced by its BCrypt hash, a hash
   * kept as given, or one generated when the body asks (kept as its keyed digest), which is
   * returned to be shown this once.
   */
  private async hashSecret(fields: Record<string, unknown>): Promise<Record<string, string> | null> {
    const secret = this.definition.hashedSecret;
    if (!secret) return null;
    const generate = fields[secret.generate] === true;
    delete fields[secret.generate];
    const hashing = this.extras.secrets!;
    const value = generate ? hashing.generate() : fields[secret.field];
    if (typeof value !== 'string' || (!generate && hashing.isKept(value))) return null;
    // A generated secret is kept as a keyed digest, one typed by an operator as BCrypt (src/oauth/clients/secrets.ts).
    fields[secret.field] = generate ? hashing.digestGenerated(value) : await hashing.hash(value);
    return generate ? { [secret.shownAs]: value } : null;
  }

  /** A secret given and asked to be generated at once, or generated for a record that cannot have one: 400. */
  private assertSecretRequest(fields: Record<string, unknown>): void {
    const secret = this.definition.hashedSecret;
    if (!secret || fields[secret.generate] !== true) return;
    if (fields[secret.field] !== undefined)
      throw badRequest(`give ${secret.field} or ${secret.generate}, not both`, { field: secret.generate });
    for (const [field, value] of Object.entries(secret.generatedOnlyWith)) {
      if (fields[field] !== value)
        throw badRequest(`${secret.generate} needs ${field} ${JSON.stringify(value)}`, { field: secret.generate });
    }
  }

  /**
   * Brings a deleted record back under its own id, as `body` (a version of its history) has it,
   * with every check of a create; `rolledBackTo` is the version's number.
   */
  async restore(tenantId: string | null, id: number, body: unknown, rolledBackTo: number): Promise<T> {
    const fields = await this.validate(tenantId, body);
    const now = new Date().toISOString();
    const restored = await this.write(() =>
      this.collection(tenantId).insert(this.storedForm({ ...fields, id, tenantId, createdAt: now, updatedAt: now })),
    );
    await this.extras.history?.recorded(tenantId, 'rollback', null, this.historyForm(restored), rolledBackTo);
    return restored;
  }

  /**
   * The checks `create` makes, without writing. A record with the same unique key (a rule's
   * path, a data entry's key) is the one the body would replace, so an edit checks as the
   * replace it becomes; a unique-key conflict of a create is found only on write (409).
   */
  async checkWithoutWriting(tenantId: string | null, body: unknown): Promise<void> {
    const existing = await this.sameKeyed(tenantId, body);
    await this.validate(tenantId, body, existing ?? undefined);
  }

  /**
   * The fields a create (no `existing`) or a replace of `existing` would store, after every check
   * it makes (a 400 or 404 otherwise); nothing is written. Impact analysis builds its candidate of them.
   */
  async fieldsFor(tenantId: string | null, body: unknown, existing?: T): Promise<Record<string, unknown>> {
    return this.validate(tenantId, body, existing);
  }

  private async sameKeyed(tenantId: string | null, body: unknown): Promise<T | null> {
    if (typeof body !== 'object' || body === null) return null;
    for (const field of this.definition.uniqueFields) {
      const value = (body as Record<string, unknown>)[field];
      if (typeof value !== 'string' && typeof value !== 'number') continue;
      const found = await this.findByUniqueField(tenantId, field, value, (body as Record<string, unknown>).mode);
      if (found) return found;
    }
    return null;
  }

  /**
   * The record whose unique `field` has this value: among the shadows for `mode` "shadow" (a
   * shadow keeps its path apart, so that it can stand beside the live rule of that path), else
   * among the live records.
   */
  async findByUniqueField(
    tenantId: string | null,
    field: string,
    value: string | number,
    mode?: unknown,
  ): Promise<T | null> {
    const { shadow } = this.definition;
    const stored = mode === 'shadow' && shadow?.field === field ? shadow.storedAs : field;
    return this.collection(tenantId).findOne({ [stored]: value });
  }

  /** A collection that issues bearer tokens stores the digest; the value is returned this once. */
  private issueToken(fields: Record<string, unknown>): Record<string, string> | null {
    const issued = this.definition.issuedToken;
    if (!issued) return null;
    const value = randomBytes(32).toString('base64url');
    fields[issued.digestField] = storageDigest(value);
    return { [issued.shownAs]: value };
  }

  /** Replaces the record; `rolledBackTo` says that `body` is that version of its history (a rollback). */
  async replace(tenantId: string | null, existing: T, body: unknown, rolledBackTo?: number): Promise<T> {
    const { record, shownOnce } = await this.replaceRecord(tenantId, existing, body, {}, rolledBackTo);
    return { ...record, ...shownOnce };
  }

  /** Replaces the record: the record as stored, and apart from it what is shown this once. */
  async replaceRecord(
    tenantId: string | null,
    existing: T,
    body: unknown,
    options: WriteOptions = {},
    rolledBackTo?: number,
  ): Promise<Written<T>> {
    const fields = await this.validate(tenantId, this.withoutEchoes(body, existing), existing);
    const generated = await this.hashSecret(fields);
    // An issued token and its use count survive a replace: only an operator's fields change.
    const kept = this.definition.issuedToken
      ? {
          [this.definition.issuedToken.digestField]: existing[this.definition.issuedToken.digestField],
          used: existing.used,
        }
      : {};
    const next = this.storedForm({
      ...(options.keepOmittedSecrets === false ? {} : this.keptSecrets(existing, fields)),
      ...fields,
      ...kept,
      ...this.serverKept(existing),
      id: existing.id,
      tenantId,
      createdAt: existing.createdAt,
      updatedAt: new Date().toISOString(),
      ...expiryOf(options),
    });
    const replaced = await this.write(() => this.collection(tenantId).upsert(next));
    await this.extras.history?.recorded(
      tenantId,
      rolledBackTo === undefined ? 'replace' : 'rollback',
      this.historyForm(existing),
      this.historyForm(replaced),
      rolledBackTo,
    );
    return { record: replaced, shownOnce: { ...generated } };
  }

  /**
   * Secrets are never shown, so no caller can send them back: a secret field a replace leaves out
   * keeps its stored value (sealed as it was) rather than being dropped with the rest of the record.
   */
  private keptSecrets(existing: T, fields: Record<string, unknown>): Record<string, unknown> {
    const omitted = (this.definition.secretFields ?? []).filter(
      (field) => fields[field] === undefined && existing[field] !== undefined,
    );
    return Object.fromEntries(omitted.map((field) => [field, existing[field]]));
  }

  /**
   * A GET's answer is PUT back as it is: the fields the server keeps (id, times, serverKept) are
   * dropped when they say what is stored; a changed one is still refused as unknown.
   */
  private withoutEchoes(body: unknown, existing: T): unknown {
    if (typeof body !== 'object' || body === null || Array.isArray(body)) return body;
    const echoed = ['id', 'createdAt', 'updatedAt', ...(this.definition.serverKept ?? [])];
    return Object.fromEntries(
      Object.entries(body).filter(([field, value]) => !(echoed.includes(field) && value === existing[field])),
    );
  }

  /** What only the server writes (CollectionDefinition.serverKept) survives a replace as it was. */
  private serverKept(existing: T): Record<string, unknown> {
    const kept = (this.definition.serverKept ?? []).filter((field) => existing[field] !== undefined);
    return Object.fromEntries(kept.map((field) => [field, existing[field]]));
  }

  async remove(tenantId: string | null, existing: T): Promise<void> {
    const problem = await this.extras.checkRemoval?.(existing, { tenantId });
    if (problem) throw badRequest(problem);
    await this.collection(tenantId).delete(existing.id);
    await this.extras.history?.recorded(tenantId, 'delete', this.historyForm(existing), null);
  }

  /** A record as the store keeps it (CollectionDefinition.shadow), as this collection's type: every field was validated. */
  private storedForm(record: Record<string, unknown>): T {
    return storedForm(this.definition, record) as unknown as T;
  }

  /** A version as the history keeps it: with the fields a rollback sends back (a shadow's path under its name). */
  private historyForm(record: T): T {
    return presentedForm(this.definition, record);
  }

  /** The record as the API shows it: secrets removed, and the store's own expiry (a CIMD client's) too. */
  present(record: T): Record<string, unknown> {
    const { expiresAt: _expiry, ...shown }: Record<string, unknown> = presentedForm(this.definition, { ...record });
    for (const field of [...(this.definition.secretFields ?? []), ...(this.definition.serverKept ?? [])])
      delete shown[field];
    return shown;
  }

  private async validate(tenantId: string | null, body: unknown, existing?: T): Promise<Record<string, unknown>> {
    assertValid<Record<string, unknown>>(this.definition.schema, body);
    const { tenantId: bodyTenant, ...fields } = body;
    if (bodyTenant !== undefined && (bodyTenant ?? null) !== tenantId)
      throw badRequest('tenantId does not match the tenant of the request', { field: 'tenantId' });
    const withDefaults: Record<string, unknown> = { ...this.definition.defaults, ...fields };
    this.keepMode(withDefaults, existing);
    this.assertSecretRequest(withDefaults);
    this.assertRegistrableUris(withDefaults);
    this.assertPublicKeySets(withDefaults);
    this.assertSecretFollowsDestination(withDefaults, existing);
    this.fillGeneratedKey(withDefaults, existing);
    await this.assertReferences(tenantId, withDefaults);
    const problem = await this.check(withDefaults, { tenantId, existing });
    if (problem) throw badRequest(problem, this.checkedField(problem, withDefaults));
    for (const field of this.definition.sealedFields ?? []) {
      if (typeof withDefaults[field] === 'string')
        withDefaults[field] = this.extras.sealer!.seal(withDefaults[field] as string);
    }
    return withDefaults;
  }

  /**
   * A client's URIs as dynamic registration takes them, no more: the Admin API must not store a
   * `javascript:` redirect URI (or any other) that /register refuses.
   */
  private assertRegistrableUris(fields: Record<string, unknown>): void {
    for (const [field, kind] of Object.entries(this.definition.registeredUris ?? {})) {
      const value = fields[field];
      for (const uri of Array.isArray(value) ? value : [value]) {
        if (typeof uri !== 'string') continue;
        const problem = kind === 'redirect' ? registrableRedirectUriProblem(uri) : webUriProblem(uri, kind);
        if (problem) throw badRequest(`${field} ${problem} (as dynamic registration requires)`, { field });
      }
    }
  }

  /** A client's JWK Set as dynamic registration takes it: a private key must not be stored (and shown back) as metadata. */
  private assertPublicKeySets(fields: Record<string, unknown>): void {
    for (const field of this.definition.publicKeySets ?? []) {
      const keys = (fields[field] as { keys?: unknown } | undefined)?.keys;
      const problem = Array.isArray(keys) ? publicKeySetProblem(keys) : null;
      if (problem) throw badRequest(`${field} ${problem} (as dynamic registration requires)`, { field });
    }
  }

  /**
   * A replace that points the stored secret somewhere else (see `secretDestinations`) must give
   * the secret again: otherwise whoever may edit the record, but was never told the secret, could
   * have it sent to a server of their own (an IdP's issuer replaced, its client secret kept).
   */
  private assertSecretFollowsDestination(fields: Record<string, unknown>, existing?: T): void {
    const destinations = this.definition.secretDestinations;
    if (!destinations || !existing || existing[destinations.secret] === undefined) return;
    if (fields[destinations.secret] !== undefined) return;
    const changed = destinations.fields.filter((field) => fields[field] !== existing[field]);
    if (changed.length === 0) return;
    throw badRequest(
      `${destinations.secret} must be given again to change ${changed.join(' and ')}: the stored one is never sent to a new destination`,
      { field: destinations.secret },
    );
  }

  /**
   * A replace keeps the record's mode when the body names none; it cannot turn a shadow live (or
   * back): promoting is its own call (POST /admin/api/policy-shadow/promote), checked as one change.
   */
  private keepMode(fields: Record<string, unknown>, existing?: T): void {
    if (!this.definition.shadow || !existing) return;
    const was = existing.mode === 'shadow' ? 'shadow' : 'live';
    if (fields.mode === undefined) {
      if (was === 'shadow') fields.mode = 'shadow';
      return;
    }
    if (fields.mode !== was)
      throw badRequest(
        `mode cannot change in a replace (this record is ${was}): promote shadows with POST /admin/api/policy-shadow/promote, or create the record anew`,
        { field: 'mode' },
      );
  }

  /** The field a check's problem is about, for the 400 to name. */
  private checkedField(problem: string, fields: Record<string, unknown>): { field?: string } {
    const leading = /^\w+/.exec(problem)?.[0];
    const field = leading && Object.hasOwn(fields, leading) ? leading : CHECKED_FIELD[this.definition.path];
    return field ? { field } : {};
  }

  private fillGeneratedKey(fields: Record<string, unknown>, existing?: T): void {
    const { pathKey } = this.definition;
    if (pathKey === 'id') return;
    if (existing && fields[pathKey] !== undefined && fields[pathKey] !== existing[pathKey]) {
      throw badRequest(`${pathKey} in the body must match the one in the path`, { field: pathKey });
    }
    fields[pathKey] ??= existing?.[pathKey] ?? (pathKey === 'idpId' ? randomUUID() : undefined);
  }

  private async assertReferences(tenantId: string | null, fields: Record<string, unknown>): Promise<void> {
    for (const [field, collection] of Object.entries(this.definition.references ?? {})) {
      const value = fields[field];
      if (value === undefined || value === null) continue;
      const target = await this.store
        .collection(storeSpecOf(definitionOfStore(collection)!), storeTenant(tenantId))
        .get(value as number);
      if (!target)
        throw badRequest(
          `${field} ${value} does not name an existing ${collection.replace(/_/g, ' ')} record in this tenant`,
          { field },
        );
    }
  }

  private async write(operation: () => Promise<T>): Promise<T> {
    try {
      return await operation();
    } catch (error) {
      if (error instanceof ConflictError) {
        throw new HttpError(
          409,
          'conflict',
          `a ${this.definition.path} record with this ${error.fields.join(' + ')} already exists in this tenant`,
          { field: error.fields.join(',') },
        );
      }
      throw error;
    }
  }
}
