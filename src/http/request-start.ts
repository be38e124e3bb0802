import { AsyncLocalStorage } from 'node:async_hooks';

/** When the request being answered began (performance.now()), wherever its work goes on. */
const requestStarts = new AsyncLocalStorage<number>();

/**
 * Runs `work` as the request that begins now. Everything acknowledged to anyone before this
 * moment (another node's write included: its caller had its answer before sending this request)
 * is in the store already, so any read that starts from now on sees it: TurnReads shares such
 * reads between the requests that began before them.
 */
export function asRequestBegunNow<T>(work: () => T): T {
  return requestStarts.run(performance.now(), work);
}

/** When the request being answered began (performance.now()); undefined outside a request. */
export function requestBegunAt(): number | undefined {
  return requestStarts.getStore();
}
