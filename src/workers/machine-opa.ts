import type { OpaLocation } from './protocol.js';

/** What the primary needs of the machine's OPA process (policy/opa's ManagedOpa). */
export interface StartableOpa {
  readonly apiToken: string;
  start(): Promise<void>;
  stop(): Promise<void>;
}

/** Makes the OPA process, which calls `onStarted` after its start and after every restart. */
export type MakeOpa = (onStarted: (url: string, pid: number | undefined) => void) => StartableOpa;

/**
 * The machine's one OPA, started for the first worker that asks, and where it is now: a restart
 * may take another port (a port taken meanwhile), so each worker that asks later (a replacement,
 * a promoted standby) is told where OPA listens then, and the workers up are told at each move.
 * Found 2026-11-30: a worker that asked after a move was told the first address for good: its
 * readiness failed after the lag bound, and its calls (with OPA's token) went to whatever held
 * the old port.
 */
export class MachineOpa {
  private opa: StartableOpa | null = null;
  private starting: Promise<void> | null = null;
  private location: OpaLocation | null = null;

  constructor(
    private readonly make: MakeOpa,
    private readonly moved: (location: OpaLocation) => void,
  ) {}

  /** Where OPA listens, once it started (started now for the first worker that asks); why not, when it could not start. */
  async whereFor(): Promise<{ opa: OpaLocation | null; error?: string }> {
    this.starting ??= this.start();
    return this.starting.then(
      () => ({ opa: this.location }),
      (error: unknown) => ({ opa: null, error: `the managed OPA could not be started: ${(error as Error).message}` }),
    );
  }

  /** Its process id, once started. */
  get pid(): number | undefined {
    return this.location?.pid;
  }

  get url(): string | undefined {
    return this.location?.url;
  }

  async stop(): Promise<void> {
    await this.starting?.catch(() => null);
    await this.opa?.stop();
  }

  private async start(): Promise<void> {
    const opa = this.make((url, pid) => {
      this.location = { url, token: opa.apiToken, pid };
      if (this.opa) this.moved(this.location);
    });
    await opa.start();
    this.opa = opa;
  }
}
