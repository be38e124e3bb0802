/**
 * Where the machine's CPU went during a measurement, from /proc: every process's user + system
 * time, put under a component (an Arbiter node, OPA, FerretDB, PostgreSQL, the load generator) by
 * the caller's `componentOf`, which sees the process and its ancestors; the rest of the machine's
 * busy time (/proc/stat) is "other processes" (on a shared machine, other people's work).
 */
import { readdirSync, readFileSync } from 'node:fs';

/** clock ticks per second of /proc's times (USER_HZ: 100 on Linux). */
const CLOCK_TICKS = 100;

export interface ProcessInfo {
  pid: number;
  ppid: number;
  /** The executable's name, at most 15 characters (`ferretdb-arbite`). */
  comm: string;
  /** Start time in ticks after boot: with the pid, names one process even if pids are reused. */
  started: number;
  ticks: number;
}

/** The component a process belongs to, or null for none of ours; `ancestors` from its parent up. */
export type ComponentOf = (process: ProcessInfo, ancestors: ProcessInfo[]) => string | null;

export interface CpuUse {
  seconds: number;
  /** Cores busy on average, per component, "other processes" included. */
  cores: Record<string, number>;
  /** Cores busy on average on the whole machine, and how many it has. */
  machine: { busy: number; cpus: number };
}

export class CpuMeter {
  private startedAt = 0;
  private before = new Map<string, number>();
  private machineBefore = { busy: 0, total: 0 };

  constructor(private readonly componentOf: ComponentOf) {}

  start(): void {
    this.startedAt = performance.now();
    this.before = ticksByProcess(readProcesses());
    this.machineBefore = machineTicks();
  }

  stop(): CpuUse {
    const seconds = (performance.now() - this.startedAt) / 1000;
    const processes = readProcesses();
    const cores: Record<string, number> = {};
    for (const info of processes.values()) {
      const component = this.componentOf(info, ancestorsOf(info, processes));
      if (component === null) continue;
      const used = info.ticks - (this.before.get(processKey(info)) ?? 0);
      cores[component] = (cores[component] ?? 0) + used / CLOCK_TICKS / seconds;
    }
    const machine = machineTicks();
    const cpus = machineCpus();
    // /proc/stat counts every CPU's ticks: its share of the total, times the CPUs, is cores busy.
    const busy =
      ((machine.busy - this.machineBefore.busy) / Math.max(1, machine.total - this.machineBefore.total)) * cpus;
    const ours = Object.values(cores).reduce((sum, value) => sum + value, 0);
    cores['other processes'] = Math.max(0, busy - ours);
    return { seconds, cores, machine: { busy, cpus } };
  }
}

function readProcesses(): Map<number, ProcessInfo> {
  const processes = new Map<number, ProcessInfo>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // it ended meanwhile
    }
    // "pid (comm) state ppid …": comm may hold spaces and parentheses, so split at the last ")".
    const close = stat.lastIndexOf(')');
    const comm = stat.slice(stat.indexOf('(') + 1, close);
    const fields = stat.slice(close + 2).split(' ');
    // After "(comm) ": state is field 3 (index 0), ppid 4, utime 14, stime 15, starttime 22 (1-based).
    processes.set(Number(entry), {
      pid: Number(entry),
      ppid: Number(fields[1]),
      comm,
      started: Number(fields[19]),
      ticks: Number(fields[11]) + Number(fields[12]),
    });
  }
  return processes;
}

function ancestorsOf(info: ProcessInfo, processes: Map<number, ProcessInfo>): ProcessInfo[] {
  const ancestors: ProcessInfo[] = [];
  for (let parent = processes.get(info.ppid); parent && ancestors.length < 64; parent = processes.get(parent.ppid))
    ancestors.push(parent);
  return ancestors;
}

function ticksByProcess(processes: Map<number, ProcessInfo>): Map<string, number> {
  return new Map([...processes.values()].map((info) => [processKey(info), info.ticks]));
}

function processKey(info: ProcessInfo): string {
  return `${info.pid}@${info.started}`;
}

/** The machine's busy and total ticks over all CPUs (the first line of /proc/stat). */
function machineTicks(): { busy: number; total: number } {
  const [, ...values] = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/);
  // A kernel too old to count a column (steal) counts none of it.
  const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = values.map(Number);
  const busy = user + nice + system + irq + softirq + steal;
  return { busy, total: busy + idle + iowait };
}

function machineCpus(): number {
  return readFileSync('/proc/stat', 'utf8')
    .split('\n')
    .filter((line) => /^cpu\d+ /.test(line)).length;
}
