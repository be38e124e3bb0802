import { Agent as HttpAgent, request as httpRequest } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import { got, type Got } from 'got';
import type { DecisionInput, DecisionPoint } from '../contract/types.js';
import { splitShared } from '../contract/shared-part.js';
import { resultVerdict, type RegoVerdict } from './verdict.js';

/**
 * Asks OPA's data API for data.arbiter.<point>.decision. Connections are pooled and kept
 * alive, each decision has a hard timeout, and every failure becomes a `failed` verdict:
 * callers fail closed, nothing here throws.
 */
export class OpaDriver {
  private readonly agents = {
    http: new HttpAgent({ keepAlive: true, maxSockets: 64 }),
    https: new HttpsAgent({ keepAlive: true, maxSockets: 64 }),
  };
  private readonly client: Got;
  /** `Authorization: Bearer <token>` on every request to OPA (its `--authentication=token`), when there is a token. */
  private readonly authorization: Record<string, string>;

  /** `baseUrl` is a function because a restarted managed OPA may listen on a new port. */
  constructor(
    private readonly baseUrl: () => string,
    private readonly timeoutMs: number,
    token: string | null = null,
  ) {
    this.authorization = token ? { authorization: `Bearer ${token}` } : {};
    this.client = got.extend({
      headers: this.authorization,
      agent: this.agents,
      timeout: { request: timeoutMs },
      throwHttpErrors: false,
      // One immediate retry, only for a pooled socket that the peer had already closed (e.g. after an OPA restart).
      retry: {
        limit: 1,
        methods: ['GET', 'POST'],
        statusCodes: [],
        errorCodes: ['ECONNRESET', 'EPIPE'],
        backoffLimit: 1,
        noise: 0,
      },
    });
  }

  /** `timeoutMs`: what is left of the decision's budget (default all of it). */
  async evaluate(point: DecisionPoint, input: DecisionInput, timeoutMs = this.timeoutMs): Promise<RegoVerdict> {
    try {
      const base = this.baseUrl();
      // The per-decision hot path: plain node:http on the pooled agent (got's per-request option
      // handling cost a fifth of a /token request's CPU); other calls keep got.
      const response = base.startsWith('http://')
        ? await this.postJson(`${base}/v1/data/arbiter/${point}/decision`, { input }, timeoutMs)
        : await this.viaGot(`${base}/v1/data/arbiter/${point}/decision`, { input }, timeoutMs);
      return await this.verdictOf(point, response);
    } catch (error) {
      return this.failure(point, error);
    }
  }

  /** A failed call as a verdict; one that ran out of time says which decision and what limit. */
  private failure(point: DecisionPoint, error: unknown): RegoVerdict {
    const reason = describeFailure(error);
    if ((error as { code?: string }).code !== 'ETIMEDOUT') return { kind: 'failed', reason };
    const description = `the ${point} policy decision did not complete within ${this.timeoutMs} ms; try again later`;
    return { kind: 'failed', reason, description };
  }

  /**
   * The same decision, with OPA's trace of it (`explain=full`, as text lines `file:row | Enter …`,
   * `Exit …`), for the Admin decision playground. Never on a protocol path: tracing is slow.
   */
  async explain(point: DecisionPoint, input: DecisionInput): Promise<{ verdict: RegoVerdict; trace: string[] }> {
    try {
      const response = await this.viaGot(
        `${this.baseUrl()}/v1/data/arbiter/${point}/decision?explain=full&pretty=true`,
        { input },
      );
      const explanation = (response.body as { explanation?: unknown } | undefined)?.explanation;
      const trace = Array.isArray(explanation)
        ? explanation.filter((line): line is string => typeof line === 'string')
        : [];
      return { verdict: await this.verdictOf(point, response), trace };
    } catch (error) {
      return { verdict: { kind: 'failed', reason: describeFailure(error) }, trace: [] };
    }
  }

  private async verdictOf(point: DecisionPoint, response: { statusCode: number; body: unknown }): Promise<RegoVerdict> {
    const body = response.body as { result?: unknown } | undefined;
    if (response.statusCode !== 200) return refusalOf(response);
    if (body === undefined || body === null || body.result === undefined) return this.undefinedVerdict();
    return resultVerdict(point, body.result);
  }

  private async viaGot(
    url: string,
    json: unknown,
    timeoutMs = this.timeoutMs,
  ): Promise<{ statusCode: number; body: unknown }> {
    const response = await this.client.post(url, { json, responseType: 'json', timeout: { request: timeoutMs } });
    return { statusCode: response.statusCode, body: response.body };
  }

  /** POST JSON over the keep-alive agent with the decision timeout; one retry for a pooled socket the peer had closed. */
  private async postJson(
    url: string,
    json: unknown,
    timeoutMs: number,
    retried = false,
  ): Promise<{ statusCode: number; body: unknown }> {
    const payload = JSON.stringify(json);
    try {
      return await new Promise((resolve, reject) => {
        const request = httpRequest(
          url,
          {
            method: 'POST',
            agent: this.agents.http,
            headers: {
              ...this.authorization,
              'content-type': 'application/json',
              'content-length': Buffer.byteLength(payload),
            },
            timeout: timeoutMs,
          },
          (response) => {
            const chunks: Buffer[] = [];
            response.on('data', (chunk: Buffer) => chunks.push(chunk));
            response.on('error', reject);
            response.on('end', () => {
              const text = Buffer.concat(chunks).toString('utf8');
              try {
                resolve({ statusCode: response.statusCode ?? 0, body: text ? JSON.parse(text) : undefined });
              } catch {
                resolve({
                  statusCode: response.statusCode === 200 ? 502 : (response.statusCode ?? 0),
                  body: { message: 'OPA answered something that is not JSON' },
                });
              }
            });
          },
        );
        request.on('timeout', () =>
          request.destroy(Object.assign(new Error('OPA did not answer in time'), { code: 'ETIMEDOUT' })),
        );
        request.on('error', reject);
        request.end(payload);
      });
    } catch (error) {
      const code = (error as { code?: string }).code;
      if (!retried && (code === 'ECONNRESET' || code === 'EPIPE')) return this.postJson(url, json, timeoutMs, true);
      throw error;
    }
  }

  /**
   * The same decision for many inputs in one round trip: an ad-hoc query that evaluates
   * data.arbiter.<point>.decision `with input as` each item. What every input shares (tenant,
   * client, request, time, …) is sent once and merged back into each item, so a batch costs OPA
   * one decode of the shared part. Each item's answer is wrapped in an array (empty when
   * undefined) so that answers stay aligned with the inputs.
   */
  async evaluateAll(point: DecisionPoint, inputs: DecisionInput[], timeoutMs = this.timeoutMs): Promise<RegoVerdict[]> {
    const { common, items } = splitShared(inputs);
    const query = `results := [[d | d := data.arbiter.${point}.decision with input as object.union(common, item)] | common := input.common; some item in input.items]`;
    try {
      const response = await this.client.post(`${this.baseUrl()}/v1/query`, {
        json: { query, input: { common, items } },
        responseType: 'json',
        timeout: { request: timeoutMs },
      });
      const body = response.body as { result?: { results?: unknown }[] } | undefined;
      const failure = (reason: string): RegoVerdict[] => inputs.map(() => ({ kind: 'failed', reason }));
      if (response.statusCode !== 200) return inputs.map(() => refusalOf(response));
      const results = body?.result?.[0]?.results;
      if (!Array.isArray(results) || results.length !== inputs.length)
        return failure(
          `OPA answered a batch of ${inputs.length} with ${Array.isArray(results) ? results.length : 'no'} results`,
        );
      const isUndefined = (result: unknown) => !Array.isArray(result) || result.length === 0;
      // One health check for the whole batch, and only when some decision is undefined.
      const undefinedVerdict = results.some(isUndefined) ? await this.undefinedVerdict() : null;
      return results.map((result): RegoVerdict =>
        isUndefined(result) ? undefinedVerdict! : resultVerdict(point, result[0]),
      );
    } catch (error) {
      const failure = this.failure(point, error);
      return inputs.map(() => failure);
    }
  }

  /**
   * An OPA without its bundle (just started or restarted) answers every query with no result,
   * exactly as if no rule applied. That must not pass for "Rego has no opinion", or a Cedar
   * permit would decide alone while the pack's default-deny rules are missing.
   */
  private async undefinedVerdict(): Promise<RegoVerdict> {
    if (await this.bundlesActivated()) return { kind: 'undefined' };
    return { kind: 'failed', reason: 'OPA has not activated the policy bundle' };
  }

  /** True once every configured bundle is activated (GET /health?bundles answers 200). */
  async bundlesActivated(): Promise<boolean> {
    try {
      const response = await this.client.get(`${this.baseUrl()}/health?bundles`);
      return response.statusCode === 200;
    } catch {
      return false;
    }
  }

  /** The revision of the bundle OPA has activated (from its bundle manifest), or null. */
  async activeRevision(bundle: string): Promise<string | null> {
    try {
      const response = await this.client.get(`${this.baseUrl()}/v1/data/system/bundles/${bundle}/manifest/revision`, {
        responseType: 'json',
        timeout: { request: Math.min(this.timeoutMs, REVISION_READ_TIMEOUT_MS) },
      });
      const revision = (response.body as { result?: unknown } | undefined)?.result;
      return response.statusCode === 200 && typeof revision === 'string' ? revision : null;
    } catch {
      return null;
    }
  }

  close(): void {
    this.agents.http.destroy();
    this.agents.https.destroy();
  }
}

/**
 * How long the revision OPA serves is waited for: /readyz answers within a second, and a hung OPA
 * must not take the store's and the in-process engine's revisions down with it (the node serves
 * from those meanwhile).
 */
const REVISION_READ_TIMEOUT_MS = 400;

/** OPA's non-200 answer as a failed verdict: with the evaluation errors it lists, a fault of the policy. */
function refusalOf(response: { statusCode: number; body: unknown }): RegoVerdict {
  const body = response.body as { message?: unknown; errors?: unknown } | undefined;
  const errors = describeOpaErrors(body?.errors);
  // "error(s) occurred while evaluating query" says nothing: the errors OPA lists say what and where.
  if (errors) return { kind: 'failed', reason: `OPA could not evaluate the policy: ${errors}`, policyFault: true };
  return { kind: 'failed', reason: `OPA answered ${response.statusCode}: ${String(body?.message ?? '')}`.trim() };
}

/** One of OPA's errors as its API and `opa eval --format json` give them: code, message, the rule's location. */
export interface OpaError {
  code?: unknown;
  message?: unknown;
  location?: { file?: unknown; row?: unknown } | null;
}

/**
 * OPA's errors as one line: `<code>: <message> (<file>:<row>)` each, `; ` between them, null when
 * there are none. The location is where in the bundle the rule that failed is written.
 */
export function describeOpaErrors(errors: unknown): string | null {
  if (!Array.isArray(errors) || errors.length === 0) return null;
  return (errors as OpaError[])
    .map((error) => {
      const code = typeof error?.code === 'string' ? `${error.code}: ` : '';
      const where = locationOf(error);
      return `${code}${String(error?.message ?? 'unknown error')}${where ? ` (${where})` : ''}`;
    })
    .join('; ');
}

/** `file:row` of an OPA error, without the leading slash OPA gives files of a bundle archive; null without a file. */
export function locationOf(error: OpaError | undefined): string | null {
  const file = error?.location?.file;
  if (typeof file !== 'string' || file === '') return null;
  const row = error?.location?.row;
  return `${file.replace(/^\/+/, '')}${typeof row === 'number' ? `:${row}` : ''}`;
}

function describeFailure(error: unknown): string {
  const { code, message } = error as { code?: string; message?: string };
  if (code === 'ETIMEDOUT') return 'OPA did not answer in time';
  if (code === 'ECONNREFUSED') return 'OPA is unreachable (connection refused)';
  return `OPA request failed: ${code ?? ''} ${message ?? String(error)}`.trim();
}
