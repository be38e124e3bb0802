/**
 * The policy layer: every decision of the service goes through `PolicyEngine.decide`.
 * The contract (inputs per decision point, result) is documented in docs/policy.md.
 */
export * from './contract/types.js';
export {
  createPolicyEngine,
  waitUntilReady,
  type PolicyEngine,
  type PolicyEngineOptions,
  type RunningPolicyEngine,
  type SharedOpa,
} from './engine.js';
export { localWasmCompiler, type WasmBuild, type WasmCompiler } from './opa/wasm.js';
export { ManagedOpa, managedOpaSettings } from './opa/process.js';
export { resolveOpaBinary } from './opa/binary.js';
export { configureOpaSandbox } from './opa/sandbox.js';
export { seedDefaultPolicies, readPolicyPack, addMissingPackRule, POLICY_PACK_DIR, type PolicyPack } from './seed.js';
export { requestInput, withoutCredentials, type RequestInputParts } from './contract/request-input.js';
export { inputSchema, RESULT_SCHEMA, checkInput } from './contract/schemas.js';
export { checkResult } from './contract/result-check.js';
export { BUNDLE_PATH } from './bundle/route.js';
export { dataEntryProblem, DATA_KEY_PATTERN } from './bundle/data-tree.js';
export {
  isBundled,
  isBundledShadow,
  POLICY_DATA,
  POLICY_RULES,
  type PolicyDataDoc,
  type PolicyRuleDoc,
} from './records.js';
export { CEDAR_ENTITIES_DATA_KEY } from './cedar/driver.js';
export type { RuleKind } from './bundle/validate-rule.js';
export type { BundleChange } from './bundle/validate.js';
export type { TrialInput } from './bundle/trial.js';
export type { PolicyFault } from './faults.js';
export type { DecisionExplanation, RuleHit } from './explain.js';
export { splitShared, joinShared, isSharedPart, type SharedPart } from './contract/shared-part.js';
export { PolicyLab, type PolicyLabOptions } from './replay/lab.js';
export { SandboxLimitError } from './sandbox/index.js';
export { CHANGE_KINDS, type ChangeKind, type ComparedDecision } from './replay/compare.js';
export {
  NO_CLIENT,
  type RecordedDecision,
  type ChangedDecision,
  type ImpactResult,
  type ChangeCounts,
  type Compared,
} from './replay/impact.js';
export { POLICY_FAULTS_COLLECTION, SHADOW_COLLECTION } from './collections.js';
export { type ShadowDifference, type ShadowStatus } from './replay/shadow.js';
export type { RecordChange, TriedBundle } from './bundle/validate.js';
export type { PolicySnapshot } from './bundle/build.js';
export type { PolicyVocabulary } from './vocabulary.js';
export { enforceHttp, httpRefusal, refusalOf, type DenyRules, type Refusal } from './refusal.js';
