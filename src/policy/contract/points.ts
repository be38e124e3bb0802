/** The named decision points, in the order the docs and the console list them. Its own module: the schemas and the types derived from them both need it. */
export const DECISION_POINTS = [
  'authorize',
  'token',
  'token_exchange',
  'introspect',
  'register',
  'access_evaluation',
  'uma_permission',
  'delegation',
  'ssf',
] as const;

export type DecisionPoint = (typeof DECISION_POINTS)[number];
