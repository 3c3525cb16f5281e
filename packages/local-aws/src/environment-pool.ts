import { availableParallelism } from 'node:os';
import { TooManyRequestsException } from './lambda-invoke';

/** What the pool needs of an execution environment (execution-environment.ts). */
export interface PooledEnvironment {
  /** False once its process has exited or was killed. */
  readonly alive: boolean;
  stop(): Promise<void>;
}

/**
 * How long an invocation waits for an environment at most: Lambda's own limit on starting one (its init phase). An
 * invocation that gets none by then is throttled, as Lambda throttles past its scaling rate.
 */
export const ENVIRONMENT_WAIT_LIMIT_MS = 10_000;

/** How often the need for a cold start is looked at again while invocations wait. */
const RECHECK_MS = 100;

/** How long an environment with nothing to do is kept before it is stopped (all but the last one). */
export const DEFAULT_IDLE_MS = 60_000;

export interface EnvironmentPoolOptions<E extends PooledEnvironment> {
  readonly functionName: string;
  /** Invocations in flight at most: the function's reserved concurrency, or what the account allows it. */
  readonly concurrency: number;
  /** Whether `concurrency` is the function's own reservation (Lambda names the throttle after it). */
  readonly reserved?: boolean;
  /** Starts one environment and runs its init; rejects with the init's error. */
  readonly start: () => Promise<E>;
  /** Default {@link DEFAULT_IDLE_MS}. */
  readonly idleMs?: number;
}

interface Waiter<E> {
  resolve(environment: E): void;
  reject(error: unknown): void;
  readonly timer: NodeJS.Timeout;
}

/**
 * One function's execution environments, scaled as Lambda scales them (docs/local-stack.md, "Under a burst"): an
 * invocation takes a free environment, or waits (not its time) for the first one free, up to the function's
 * concurrency; past it, it is throttled at once (`TooManyRequestsException`). A cold start costs the shared cores
 * about 0.35 s, so one is queued only for a waiting invocation the running environments would not serve sooner
 * (both times measured), and one at a time per function, so no function's burst holds another's start back.
 */
export class EnvironmentPool<E extends PooledEnvironment> {
  private readonly idle: { environment: E; since: number }[] = [];
  private readonly alive = new Set<E>();
  private readonly waiters: Waiter<E>[] = [];
  private readonly idleMs: number;
  private readonly reaper: NodeJS.Timeout;
  /** Invocations admitted and not yet given back: waiting for an environment, or running in one. */
  private inFlight = 0;
  /** A cold start waiting for a slot of the machine's (one at most), and cold starts under way. */
  private queuedStarts = 0;
  private initializing = 0;
  /** How long an invocation and an init take here now (moving averages; unknown until one has been seen). */
  private runMs: number | undefined;
  private initMs: number | undefined;
  /** When each environment running an invocation was handed to it. */
  private readonly handedAt = new Map<E, number>();
  /** Looks again while invocations wait, as the running ones age. */
  private recheck: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(private readonly options: EnvironmentPoolOptions<E>) {
    const { concurrency } = options;
    if (!Number.isInteger(concurrency) || concurrency < 1) {
      throw new Error(`${options.functionName}'s concurrency must be a positive integer, got ${concurrency}`);
    }
    this.idleMs = options.idleMs ?? DEFAULT_IDLE_MS;
    this.reaper = setInterval(() => this.reap(), Math.max(1_000, this.idleMs / 2));
    this.reaper.unref();
  }

  /** The environments alive now, busy or idle. */
  environments(): E[] {
    return [...this.alive].filter((environment) => environment.alive);
  }

  /**
   * An environment for one invocation: a free one, or the first to be free while one is started for it. Throws
   * `TooManyRequestsException` at the concurrency limit, or when none can be had within
   * {@link ENVIRONMENT_WAIT_LIMIT_MS}; rejects with the init's error when the cold start it waited for failed.
   * Every environment acquired is given back with {@link release}.
   */
  async acquire(): Promise<E> {
    if (this.stopped) throw new Error(`${this.options.functionName} is stopped`);
    if (this.inFlight >= this.options.concurrency) {
      throw new TooManyRequestsException(
        this.options.functionName,
        this.options.reserved
          ? 'ReservedFunctionConcurrentInvocationLimitExceeded'
          : 'ConcurrentInvocationLimitExceeded',
        `${this.options.concurrency} invocations in flight, its concurrency limit`,
      );
    }
    this.inFlight += 1;
    const free = this.takeIdle();
    if (free) {
      this.handedAt.set(free, Date.now());
      return free;
    }
    try {
      return await new Promise<E>((resolve, reject) => {
        const waiter: Waiter<E> = {
          resolve,
          reject,
          timer: setTimeout(() => {
            this.forget(waiter);
            reject(
              new TooManyRequestsException(
                this.options.functionName,
                'ConcurrentInvocationLimitExceeded',
                `no environment could be started within ${ENVIRONMENT_WAIT_LIMIT_MS} ms`,
              ),
            );
          }, ENVIRONMENT_WAIT_LIMIT_MS),
        };
        this.waiters.push(waiter);
        this.scale();
      });
    } catch (error) {
      this.inFlight -= 1;
      throw error;
    }
  }

  /**
   * Gives an environment back after its invocation: to the next waiting invocation, or idle. One that is not
   * `reusable` (it crashed, or its invocation ran past its deadline and it was ended, as Lambda ends it) is stopped.
   */
  release(environment: E, reusable: boolean): void {
    this.inFlight -= 1;
    const handedAt = this.handedAt.get(environment);
    this.handedAt.delete(environment);
    if (handedAt !== undefined) this.runMs = average(this.runMs, Date.now() - handedAt);
    if (reusable) {
      this.hand(environment);
      return;
    }
    this.drop(environment);
    this.scale();
  }

  /** Starts one environment now and keeps it idle; rejects with the init's error. */
  async warm(): Promise<void> {
    this.hand(await machineInits.run(() => this.startOne()));
  }

  /** Stops every environment; invocations still waiting for one fail. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.reaper);
    clearTimeout(this.recheck);
    for (const waiter of this.waiters.splice(0)) {
      clearTimeout(waiter.timer);
      waiter.reject(new Error(`${this.options.functionName} is stopped`));
    }
    this.idle.length = 0;
    const all = [...this.alive];
    this.alive.clear();
    await Promise.all(all.map((environment) => environment.stop()));
  }

  /** Queues a cold start when a waiting invocation needs one, and none is queued already. */
  private scale(): void {
    if (this.stopped) return;
    if (this.waiters.length > 0 && !this.recheck) {
      this.recheck = setTimeout(() => {
        this.recheck = undefined;
        this.scale();
      }, RECHECK_MS);
    }
    const starting = this.queuedStarts + this.initializing;
    if (this.queuedStarts > 0 || this.alive.size + starting >= this.options.concurrency) return;
    if (this.unserved() <= 0) return;
    this.queuedStarts += 1;
    void machineInits.run(() => this.coldStart());
  }

  /**
   * The waiting invocations that neither the cold starts under way nor the running environments would serve within
   * an init's time: those a new environment would serve sooner. Before an invocation or an init has been timed,
   * every waiting invocation not covered by a start is.
   */
  private unserved(): number {
    const starting = this.queuedStarts + this.initializing;
    const running = this.alive.size - this.idle.length;
    if (this.runMs === undefined || this.initMs === undefined || running === 0) return this.waiters.length - starting;
    // An invocation that has run longer than usual is likely to run on: it counts at its age so far.
    const oldest = Math.min(Date.now(), ...this.handedAt.values());
    const runMs = Math.max(1, this.runMs, Date.now() - oldest);
    return this.waiters.length - running * Math.floor(this.initMs / runMs) - starting;
  }

  private async coldStart(): Promise<void> {
    this.queuedStarts -= 1;
    // Environments given back meanwhile may serve the invocations this start was queued for.
    if (this.stopped || this.unserved() <= 0) return;
    this.initializing += 1;
    // The next one may queue meanwhile.
    this.scale();
    let environment: E;
    try {
      environment = await this.startOne();
    } catch (error) {
      this.initializing -= 1;
      // As Lambda reports a failed init: to the invocation that waited for it.
      const waiter = this.waiters.shift();
      if (waiter) {
        clearTimeout(waiter.timer);
        waiter.reject(error);
      }
      this.scale();
      return;
    }
    this.initializing -= 1;
    this.hand(environment);
    this.scale();
  }

  private async startOne(): Promise<E> {
    const startedAt = Date.now();
    const environment = await this.options.start();
    this.initMs = average(this.initMs, Date.now() - startedAt);
    if (this.stopped) {
      // Started while the function was being stopped: it must not outlive it.
      await environment.stop();
      throw new Error(`${this.options.functionName} is stopped`);
    }
    this.alive.add(environment);
    return environment;
  }

  /** A free environment goes to the invocation that has waited longest, or joins the idle ones. */
  private hand(environment: E): void {
    if (!environment.alive || this.stopped) {
      this.drop(environment);
      this.scale();
      return;
    }
    const waiter = this.waiters.shift();
    if (!waiter) {
      this.idle.push({ environment, since: Date.now() });
      return;
    }
    clearTimeout(waiter.timer);
    this.handedAt.set(environment, Date.now());
    waiter.resolve(environment);
  }

  private takeIdle(): E | undefined {
    for (let entry = this.idle.pop(); entry; entry = this.idle.pop()) {
      if (entry.environment.alive) return entry.environment;
      this.alive.delete(entry.environment);
    }
    return undefined;
  }

  private forget(waiter: Waiter<E>): void {
    const index = this.waiters.indexOf(waiter);
    if (index >= 0) this.waiters.splice(index, 1);
  }

  private drop(environment: E): void {
    this.alive.delete(environment);
    void environment.stop();
  }

  /** Stops the environments idle for longer than `idleMs`, keeping the most recently used one warm. */
  private reap(): void {
    const cutoff = Date.now() - this.idleMs;
    // Oldest first; the last one stays whatever its age.
    while (this.idle.length > 1 && this.idle[0]!.since < cutoff) this.drop(this.idle.shift()!.environment);
  }
}

/** A moving average that follows the machine's load within a few samples. */
function average(previous: number | undefined, sample: number): number {
  return previous === undefined ? sample : 0.7 * previous + 0.3 * sample;
}

/** At most `size` tasks at once; the others wait in order. */
class Semaphore {
  private free: number;
  private readonly waiting: (() => void)[] = [];

  constructor(size: number) {
    this.free = size;
  }

  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.free > 0) this.free -= 1;
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    try {
      return await task();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.free += 1;
    }
  }
}

/**
 * Cold starts under way at once in this process, over every function: one per core. Each is a process importing its
 * bundle, about 0.2 s of a core; Lambda starts each on hardware of its own, but here twenty at once would starve
 * the invocations already running (and each other) of the machine's cores.
 */
const machineInits = new Semaphore(availableParallelism());
