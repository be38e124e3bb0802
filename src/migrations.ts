/**
 * Part of the composition root: the steps that bring a store written by an older Arbiter to the
 * layout this one reads (src/store/schema-version.ts runs them at every start and in
 * `arbiter migrate`). Add a step with the next number whenever a release changes how records are
 * stored, and say in README "Upgrading" what it does; never change a step that has shipped.
 */
import type { Migration } from './store/index.js';

export const MIGRATIONS: readonly Migration[] = [
  {
    to: 1,
    description:
      'baseline: the layout of Arbiter 0.1 (stores written before schema versions hold it already; nothing to change)',
    run: async () => undefined,
  },
];

/** The schema version this release writes. */
export const SCHEMA_VERSION = Math.max(...MIGRATIONS.map((step) => step.to));
