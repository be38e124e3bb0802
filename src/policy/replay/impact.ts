/**
 * Impact analysis: recorded decisions replayed against the policy in force and against a
 * candidate bundle, and every decision whose outcome differs, with a summary by decision point and
 * by client. Shadow evaluation compares the same way, with the decision recorded live in place of
 * the replay of the policy in force.
 */
import { checkInput } from '../contract/schemas.js';
import { DECISION_POINTS, type DecisionInput, type DecisionPoint } from '../contract/types.js';
import { CHANGE_KINDS, changeKindOf, comparedDecision, type ChangeKind, type ComparedDecision } from './compare.js';
import type { Pacer } from './pacer.js';
import type { PreparedPolicy } from './replayer.js';

/** One decision as the audit log holds it (an entry of a batch holds several: `index` says which). */
export interface RecordedDecision {
  auditId: number;
  /** Only when the entry holds several decisions: which one, from 0. */
  index?: number;
  /** When it was decided: the audit entry's createdAt. */
  time: string;
  tenantId: string | null;
  point: string;
  clientId: string | null;
  subject: string | null;
  input: unknown;
  /** As recorded: the decision with its point and engines. */
  decision: Record<string, unknown>;
}

/** A decision whose outcome differs: where it was recorded, and both results. */
export interface ChangedDecision {
  auditId: number;
  /** Only for an entry that holds several decisions (an AuthZEN batch, UMA permissions). */
  index?: number;
  time: string;
  point: string;
  clientId: string | null;
  subject: string | null;
  kind: ChangeKind;
  before: ComparedDecision;
  after: ComparedDecision;
}

export type ChangeCounts = { replayed: number; changed: number } & Record<ChangeKind, number>;

/** What a replay found: how many decisions were replayed (and skipped), the changed ones, the summary. */
export interface ImpactResult {
  replayed: number;
  /** Recorded inputs that no longer fit their point's input schema (an older contract): not replayed. */
  skipped: number;
  changed: ChangedDecision[];
  summary: { byPoint: Record<string, ChangeCounts>; byClient: Record<string, ChangeCounts> };
}

/** The key of decisions made without a client (a dynamic registration, an anonymous AuthZEN call) in `byClient`. */
export const NO_CLIENT = '(none)';

/** A decision compared: its result before and after, and the kind of difference (null: none). */
export interface Compared {
  recorded: RecordedDecision;
  before: ComparedDecision;
  after: ComparedDecision;
  kind: ChangeKind | null;
}

/**
 * The decisions decided by `candidate` and compared with `baseline`'s decisions on the same
 * inputs, or with the decisions as recorded when there is no baseline (shadow evaluation).
 * Inputs that no longer fit their point's schema are returned apart, undecided.
 */
export async function compareDecisions(
  decisions: RecordedDecision[],
  candidate: PreparedPolicy,
  baseline: PreparedPolicy | null,
  pacer?: Pacer,
): Promise<{ compared: Compared[]; skipped: RecordedDecision[] }> {
  const compared: Compared[] = [];
  const skipped: RecordedDecision[] = [];
  const byPoint = new Map<DecisionPoint, RecordedDecision[]>();
  for (const recorded of decisions) {
    const point = DECISION_POINTS.find((known) => known === recorded.point);
    if (!point || checkInput(point, recorded.input as DecisionInput)) skipped.push(recorded);
    else byPoint.set(point, [...(byPoint.get(point) ?? []), recorded]);
  }
  for (const [point, all] of byPoint) {
    for (let start = 0; start < all.length; start += STEP_DECISIONS) {
      if (start > 0) await pacer?.step();
      compared.push(...(await comparePoint(point, all.slice(start, start + STEP_DECISIONS), candidate, baseline)));
    }
  }
  return { compared, skipped };
}

/** Decisions compared between two paced steps: a few milliseconds of work. */
const STEP_DECISIONS = 100;

async function comparePoint(
  point: DecisionPoint,
  group: RecordedDecision[],
  candidate: PreparedPolicy,
  baseline: PreparedPolicy | null,
): Promise<Compared[]> {
  const inputs = group.map((recorded) => recorded.input as DecisionInput);
  const [after, before] = await Promise.all([
    candidate.decideAll(point, inputs),
    baseline ? baseline.decideAll(point, inputs) : null,
  ]);
  // decideAll answers one outcome per input, in order.
  return group.map((recorded, index) => {
    const then = before?.[index];
    const now = after[index]!;
    const was = comparedDecision(then ? { ...then.decision, engineError: then.engineError } : recorded.decision);
    const is = comparedDecision({ ...now.decision, engineError: now.engineError });
    return { recorded, before: was, after: is, kind: changeKindOf(was, is) };
  });
}

/** Counts and lists as decisions are compared; `result()` is the answer. `listChanged: false` only counts. */
export class ImpactTally {
  constructor(private readonly listChanged = true) {}

  private replayed = 0;
  private skipped = 0;
  private readonly changed: ChangedDecision[] = [];
  private readonly byPoint = countsTable();
  private readonly byClient = countsTable();

  add({ compared, skipped }: { compared: Compared[]; skipped: RecordedDecision[] }): void {
    this.skipped += skipped.length;
    for (const each of compared) {
      this.replayed += 1;
      const counts = [
        countsOf(this.byPoint, each.recorded.point),
        countsOf(this.byClient, each.recorded.clientId ?? NO_CLIENT),
      ];
      for (const count of counts) count.replayed += 1;
      if (!each.kind) continue;
      for (const count of counts) {
        count.changed += 1;
        count[each.kind] += 1;
      }
      if (this.listChanged) this.changed.push(changedDecision(each, each.kind));
    }
  }

  result(): ImpactResult {
    const newestFirst = [...this.changed].sort((a, b) =>
      a.time < b.time ? 1 : a.time > b.time ? -1 : b.auditId - a.auditId,
    );
    return {
      replayed: this.replayed,
      skipped: this.skipped,
      changed: newestFirst,
      summary: { byPoint: this.byPoint, byClient: this.byClient },
    };
  }
}

/** The item of a changed decision, as impact analysis and the shadow's differences list it. */
export function changedDecision(compared: Compared, kind: ChangeKind): ChangedDecision {
  const { recorded } = compared;
  return {
    auditId: recorded.auditId,
    ...(recorded.index === undefined ? {} : { index: recorded.index }),
    time: recorded.time,
    point: recorded.point,
    clientId: recorded.clientId,
    subject: recorded.subject,
    kind,
    before: compared.before,
    after: compared.after,
  };
}

export function emptyCounts(): ChangeCounts {
  return {
    replayed: 0,
    changed: 0,
    ...(Object.fromEntries(CHANGE_KINDS.map((kind) => [kind, 0])) as Record<ChangeKind, number>),
  };
}

/**
 * A table of counts by point or by client id, without a prototype: a client id is whatever an
 * operator named it, `__proto__` too, which in a plain object would name the prototype every
 * object shares, and the counts would be added there.
 */
export function countsTable(): Record<string, ChangeCounts> {
  return Object.create(null) as Record<string, ChangeCounts>;
}

function countsOf(table: Record<string, ChangeCounts>, key: string): ChangeCounts {
  table[key] ??= emptyCounts();
  return table[key];
}

/**
 * Replays the pages of recorded decisions (newest first, as the audit log gives them) against the
 * policy in force and the candidate, a page at a time, pacing itself between pages so that live
 * traffic keeps its share of the event loop.
 */
export async function replayImpact(
  pages: AsyncIterable<RecordedDecision[]>,
  live: PreparedPolicy,
  candidate: PreparedPolicy,
  pacer: Pacer,
): Promise<ImpactResult> {
  const tally = new ImpactTally();
  for await (const page of pages) {
    await pacer.step();
    tally.add(await compareDecisions(page, candidate, live, pacer));
  }
  return tally.result();
}
