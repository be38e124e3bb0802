import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { pgDriver } from './driver.js';
import type { PostgresSettings } from './settings.js';

/** How long a lost LISTEN connection waits before it connects again (its watchers' polling covers the gap). */
const RECONNECT_MS = 1000;

/**
 * Changes announced between the nodes of one PostgreSQL store (LISTEN/NOTIFY): a write to a watched
 * collection is told to this node's watchers at once and to the other nodes' through one NOTIFY,
 * sent before the writer is answered, so that what they keep (a policy snapshot, a candidate
 * revision) is dropped within a round trip instead of at their next poll. Polling stays the
 * fallback: a NOTIFY is lost while a node's LISTEN connection is down, and no node relies on it alone.
 *
 * One channel per schema (several Arbiter stores may share a database); the payload names the
 * collections and the sending node, which ignores its own.
 */
export class PostgresSignals {
  private readonly watchers = new Map<string, Set<() => void>>();
  private readonly node = randomUUID();
  private readonly channel: string;
  private listener: pg.Client | null = null;
  private reconnect: NodeJS.Timeout | null = null;
  private closed = false;

  constructor(
    private readonly settings: PostgresSettings,
    private readonly pool: pg.Pool,
    /** Told of every change another node announced (Store.onWrite: reads kept before it may be stale). */
    private readonly onRemoteChange: () => void = () => {},
  ) {
    this.channel = `arbiter_changes_${settings.schema ?? 'public'}`.slice(0, 63);
  }

  /** Calls `listener` after each write to one of `collections`, by this node or another; starts listening at the first watch. */
  watch(collections: readonly string[], listener: () => void): void {
    for (const collection of collections) {
      let listeners = this.watchers.get(collection);
      if (!listeners) this.watchers.set(collection, (listeners = new Set()));
      listeners.add(listener);
    }
    if (!this.listener && !this.reconnect) void this.listen();
  }

  isWatched(collection: string): boolean {
    return this.watchers.has(collection);
  }

  /** Tells this node's watchers, then the other nodes (one NOTIFY); a NOTIFY that fails is left to the polling. */
  async announce(collection: string): Promise<void> {
    this.tell([collection]);
    const payload = JSON.stringify({ node: this.node, collections: [collection] });
    await this.pool.query('SELECT pg_notify($1, $2)', [this.channel, payload]).catch(() => undefined);
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.reconnect) clearTimeout(this.reconnect);
    await this.listener?.end().catch(() => undefined);
    this.listener = null;
  }

  private tell(collections: readonly string[]): void {
    for (const collection of collections) for (const listener of this.watchers.get(collection) ?? []) listener();
  }

  /** A connection of its own (not the pool's), held for as long as the store is open. */
  private async listen(): Promise<void> {
    if (this.closed) return;
    const client = new (pgDriver().Client)({
      connectionString: this.settings.connectionString,
      connectionTimeoutMillis: this.settings.connectTimeoutMs,
      keepAlive: true,
      application_name: 'arbiter-listen',
    });
    this.listener = client;
    const lost = () => {
      if (this.listener !== client) return;
      this.listener = null;
      void client.end().catch(() => undefined);
      if (!this.closed) this.reconnect = setTimeout(() => ((this.reconnect = null), void this.listen()), RECONNECT_MS);
    };
    client.on('error', lost);
    client.on('end', lost);
    client.on('notification', (message) => this.received(message.payload));
    try {
      await client.connect();
      await client.query(`LISTEN ${quotedChannel(this.channel)}`);
      // Whatever changed while not listening is only seen by polling: tell the watchers to look now.
      this.tell([...this.watchers.keys()]);
    } catch {
      lost();
    }
  }

  private received(payload: string | undefined): void {
    let message: { node?: unknown; collections?: unknown };
    try {
      message = JSON.parse(payload ?? '') as typeof message;
    } catch {
      return;
    }
    if (message.node === this.node || !Array.isArray(message.collections)) return;
    this.onRemoteChange();
    this.tell(message.collections.filter((name): name is string => typeof name === 'string'));
  }
}

function quotedChannel(channel: string): string {
  return `"${channel.replaceAll('"', '""')}"`;
}
