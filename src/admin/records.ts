import { randomBytes, randomUUID } from 'node:crypto';
import {
  ConflictError,
  storageDigest,
  type Sealer,
  type Store,
  type TenantCollection,
  type TextSearch,
} from '../store/index.js';
import { HttpError, badRequest, notFound } from '../http/errors.js';
import { assertValid, isBcryptHash } from '../http/validation.js';
import {
  generateClientSecret,
  hashClientSecret,
  registrableRedirectUriProblem,
  webUriProblem,
} from '../oauth/index.js';
import { registerTenant, storeTenant } from '../tenancy/index.js';
import {
  definitionOfStore,
  presentedForm,
  storedForm,
  storeSpecOf,
  type CollectionDefinition,
} from '../catalog/index.js';
import type { RecordHistory } from './history.js';
import type { AdminRecord } from './admin-record.js';

export type { AdminRecord };

/**
 * Checks a record beyond its schema (rule syntax, payload JSON); returns an error message or null.
 * A message that starts with a field name (`path must …`) is about that field; any other is
 * about the collection's checked field (see CHECKED_FIELD).
 */
export type RecordCheck = (
  record: Record<string, unknown>,
  context: { tenantId: string | null; existing?: AdminRecord },
) => Promise<string | null>;

/** Checks that a record may be deleted (a policy rule the bundle cannot do without); returns an error message or null. */
export type RemovalCheck = (existing: AdminRecord, context: { tenantId: string | null }) => Promise<string | null>;

/** What a collection does beyond the generic rules: its delete check, the history it keeps. */
export interface RecordExtras {
  checkRemoval?: RemovalCheck;
  history?: RecordHistory;
}

/** The field whose value a collection's check judges: a rule's source, a data entry's JSON. */
const CHECKED_FIELD: Record<string, string> = { 'policy-rules': 'content', 'policy-data': 'payload' };

/**
 * Create/read/replace/delete of one Admin API collection, tenant by tenant. All the
 * HTTP-free rules live here: defaults, references, unique keys, secrets kept out of responses.
 */
export class AdminRecords {
  constructor(
    private readonly store: Store,
    readonly definition: CollectionDefinition,
    private readonly sealer: Sealer,
    private readonly check: RecordCheck = async () => null,
    private readonly extras: RecordExtras = {},
  ) {}

  /** The versions this collection keeps of its records (policy rules and data), if it keeps any. */
  get history(): RecordHistory | undefined {
    return this.extras.history;
  }

  collection(tenantId: string | null): TenantCollection<AdminRecord> {
    return this.store.collection<AdminRecord>(storeSpecOf(this.definition), storeTenant(tenantId));
  }

  /** One page of the tenant's records (those `search` finds, when given) by ascending id. */
  async list(
    tenantId: string | null,
    page: { offset: number; limit: number },
    search?: TextSearch,
  ): Promise<AdminRecord[]> {
    return this.collection(tenantId).find(
      {},
      { sort: { field: 'id', direction: 'asc' }, skip: page.offset, limit: page.limit, search },
    );
  }

  /** How many records the tenant has (that `search` finds, when given). */
  count(tenantId: string | null, search?: TextSearch): Promise<number> {
    return this.collection(tenantId).count({}, search);
  }

  async find(tenantId: string | null, key: string): Promise<AdminRecord | null> {
    const records = this.collection(tenantId);
    if (this.definition.pathKey !== 'id') return records.findOne({ [this.definition.pathKey]: key });
    return /^\d{1,15}$/.test(key) ? records.get(Number(key)) : null;
  }

  async get(tenantId: string | null, key: string): Promise<AdminRecord> {
    const record = await this.find(tenantId, key);
    if (!record)
      throw notFound(
        `no ${this.definition.path} record ${JSON.stringify(key)}${tenantId ? ` in tenant ${tenantId}` : ''}`,
      );
    return record;
  }

  async create(tenantId: string | null, body: unknown): Promise<AdminRecord> {
    const fields = await this.validate(tenantId, body);
    const generated = await this.hashSecret(fields);
    const now = new Date().toISOString();
    const id = await this.store.nextSequence(this.definition.store);
    await registerTenant(this.store, tenantId);
    const issued = this.issueToken(fields);
    const created = await this.write(() =>
      this.collection(tenantId).insert(
        storedForm(this.definition, { ...fields, id, tenantId, createdAt: now, updatedAt: now }),
      ),
    );
    await this.extras.history?.recorded(tenantId, 'create', null, this.historyForm(created));
    return { ...created, ...issued, ...generated };
  }

  /**
   * The collection's hashed secret (a client's): a clear one replaced by its BCrypt hash, a hash
   * kept as given, or one generated when the body asks, which is returned to be shown this once.
   */
  private async hashSecret(fields: Record<string, unknown>): Promise<Record<string, string> | null> {
    const secret = this.definition.hashedSecret;
    if (!secret) return null;
    const generate = fields[secret.generate] === true;
    delete fields[secret.generate];
    const value = generate ? generateClientSecret() : fields[secret.field];
    if (typeof value !== 'string' || (!generate && isBcryptHash(value))) return null;
    fields[secret.field] = await hashClientSecret(value);
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
  async restore(tenantId: string | null, id: number, body: unknown, rolledBackTo: number): Promise<AdminRecord> {
    const fields = await this.validate(tenantId, body);
    const now = new Date().toISOString();
    const restored = await this.write(() =>
      this.collection(tenantId).insert(
        storedForm(this.definition, { ...fields, id, tenantId, createdAt: now, updatedAt: now }),
      ),
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
  async fieldsFor(tenantId: string | null, body: unknown, existing?: AdminRecord): Promise<Record<string, unknown>> {
    return this.validate(tenantId, body, existing);
  }

  private async sameKeyed(tenantId: string | null, body: unknown): Promise<AdminRecord | null> {
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
  ): Promise<AdminRecord | null> {
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
  async replace(
    tenantId: string | null,
    existing: AdminRecord,
    body: unknown,
    rolledBackTo?: number,
  ): Promise<AdminRecord> {
    const fields = await this.validate(tenantId, this.withoutEchoes(body, existing), existing);
    const generated = await this.hashSecret(fields);
    // An issued token and its use count survive a replace: only an operator's fields change.
    const kept = this.definition.issuedToken
      ? {
          [this.definition.issuedToken.digestField]: existing[this.definition.issuedToken.digestField],
          used: existing.used,
        }
      : {};
    const next = storedForm(this.definition, {
      ...this.keptSecrets(existing, fields),
      ...fields,
      ...kept,
      ...this.serverKept(existing),
      id: existing.id,
      tenantId,
      createdAt: existing.createdAt,
      updatedAt: new Date().toISOString(),
    });
    const replaced = await this.write(() => this.collection(tenantId).upsert(next));
    await this.extras.history?.recorded(
      tenantId,
      rolledBackTo === undefined ? 'replace' : 'rollback',
      this.historyForm(existing),
      this.historyForm(replaced),
      rolledBackTo,
    );
    return { ...replaced, ...generated };
  }

  /**
   * Secrets are never shown, so no caller can send them back: a secret field a replace leaves out
   * keeps its stored value (sealed as it was) rather than being dropped with the rest of the record.
   */
  private keptSecrets(existing: AdminRecord, fields: Record<string, unknown>): Record<string, unknown> {
    const omitted = (this.definition.secretFields ?? []).filter(
      (field) => fields[field] === undefined && existing[field] !== undefined,
    );
    return Object.fromEntries(omitted.map((field) => [field, existing[field]]));
  }

  /** What only the server writes (CollectionDefinition.serverKept) survives a replace as it was. */
  /**
   * A GET's answer is PUT back as it is: the fields the server keeps (id, times, serverKept) are
   * dropped when they say what is stored; a changed one is still refused as unknown.
   */
  private withoutEchoes(body: unknown, existing: AdminRecord): unknown {
    if (typeof body !== 'object' || body === null || Array.isArray(body)) return body;
    const echoed = ['id', 'createdAt', 'updatedAt', ...(this.definition.serverKept ?? [])];
    return Object.fromEntries(
      Object.entries(body).filter(([field, value]) => !(echoed.includes(field) && value === existing[field])),
    );
  }

  private serverKept(existing: AdminRecord): Record<string, unknown> {
    const kept = (this.definition.serverKept ?? []).filter((field) => existing[field] !== undefined);
    return Object.fromEntries(kept.map((field) => [field, existing[field]]));
  }

  async remove(tenantId: string | null, existing: AdminRecord): Promise<void> {
    const problem = await this.extras.checkRemoval?.(existing, { tenantId });
    if (problem) throw badRequest(problem);
    await this.collection(tenantId).delete(existing.id);
    await this.extras.history?.recorded(tenantId, 'delete', this.historyForm(existing), null);
  }

  /** A version as the history keeps it: with the fields a rollback sends back (a shadow's path under its name). */
  private historyForm(record: AdminRecord): AdminRecord {
    return presentedForm(this.definition, record);
  }

  /** The record as the API shows it: secrets removed, and the store's own expiry (a CIMD client's) too. */
  present(record: AdminRecord): Record<string, unknown> {
    const { expiresAt: _expiry, ...shown }: Record<string, unknown> = presentedForm(this.definition, { ...record });
    for (const field of [...(this.definition.secretFields ?? []), ...(this.definition.serverKept ?? [])])
      delete shown[field];
    return shown;
  }

  private async validate(
    tenantId: string | null,
    body: unknown,
    existing?: AdminRecord,
  ): Promise<Record<string, unknown>> {
    assertValid<Record<string, unknown>>(this.definition.schema, body);
    const { tenantId: bodyTenant, ...fields } = body;
    if (bodyTenant !== undefined && (bodyTenant ?? null) !== tenantId)
      throw badRequest('tenantId does not match the tenant of the request', { field: 'tenantId' });
    const withDefaults: Record<string, unknown> = { ...this.definition.defaults, ...fields };
    this.keepMode(withDefaults, existing);
    this.assertSecretRequest(withDefaults);
    this.assertRegistrableUris(withDefaults);
    this.assertSecretFollowsDestination(withDefaults, existing);
    this.fillGeneratedKey(withDefaults, existing);
    await this.assertReferences(tenantId, withDefaults);
    const problem = await this.check(withDefaults, { tenantId, existing });
    if (problem) throw badRequest(problem, this.checkedField(problem, withDefaults));
    for (const field of this.definition.sealedFields ?? []) {
      if (typeof withDefaults[field] === 'string')
        withDefaults[field] = this.sealer.seal(withDefaults[field] as string);
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

  /**
   * A replace that points the stored secret somewhere else (see `secretDestinations`) must give
   * the secret again: otherwise whoever may edit the record, but was never told the secret, could
   * have it sent to a server of their own (an IdP's issuer replaced, its client secret kept).
   */
  private assertSecretFollowsDestination(fields: Record<string, unknown>, existing?: AdminRecord): void {
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
  private keepMode(fields: Record<string, unknown>, existing?: AdminRecord): void {
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

  private fillGeneratedKey(fields: Record<string, unknown>, existing?: AdminRecord): void {
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

  private async write(operation: () => Promise<AdminRecord>): Promise<AdminRecord> {
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
