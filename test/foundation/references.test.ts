import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { ADMIN_API_REFERENCE, adminApiReference } from '../../scripts/admin-api-reference.js';
import { CONFIGURATION_REFERENCE, configurationReference } from '../../scripts/config-reference.js';
import { GENERATED_RESULT_VALIDATOR, resultValidatorSource } from '../../scripts/result-validator.js';
import { ENVIRONMENT, projectPath } from '../../src/config/index.js';

/**
 * The files that scripts write from the code (the references in docs/ from the configuration
 * schema and the Admin API's OpenAPI document; the decision result's validator from its schema)
 * are committed as the scripts write them today: a setting, an operation or a schema added,
 * changed or removed without running the script fails here, naming it.
 */
describe('The generated references in docs/, and the generated code', function () {
  const references = [
    { file: CONFIGURATION_REFERENCE, render: configurationReference, command: 'npm run docs:config' },
    { file: ADMIN_API_REFERENCE, render: adminApiReference, command: 'npm run docs:admin-api' },
    { file: GENERATED_RESULT_VALIDATOR, render: resultValidatorSource, command: 'npm run generate:result-validator' },
  ];
  for (const { file, render, command } of references)
    it(`${file} is what \`${command}\` writes from the code`, function () {
      const committed = readFileSync(projectPath(file), 'utf8');
      const rendered = render();
      const differing = firstDifferingLine(committed, rendered);
      expect(differing, `${file} differs from the code (run \`${command}\`): ${differing}`).to.equal(null);
    });

  it('lists every setting of the configuration, each with its meaning', function () {
    const reference = readFileSync(projectPath(CONFIGURATION_REFERENCE), 'utf8');
    for (const variable of Object.keys(ENVIRONMENT))
      expect(reference, variable).to.match(new RegExp(`^\\| \`${variable}\` \\| .+ \\| [^|\\s][^|]* \\|$`, 'm'));
  });
});

/** The first line where the two texts differ, both versions quoted; null when they are equal. */
function firstDifferingLine(committed: string, rendered: string): string | null {
  if (committed === rendered) return null;
  const [left, right] = [committed.split('\n'), rendered.split('\n')];
  const index = left.findIndex((line, at) => line !== right[at]);
  const at = index === -1 ? left.length : index;
  return `line ${at + 1}: committed ${JSON.stringify(left[at] ?? '(end)')}, written ${JSON.stringify(right[at] ?? '(end)')}`;
}
