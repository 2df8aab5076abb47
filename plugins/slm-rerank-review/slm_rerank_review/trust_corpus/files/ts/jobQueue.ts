export interface Job<T> {
  id: string;
  payload: T;
  attempts: number;
  notBefore: number;
}

export interface QueueOptions {
  maxAttempts: number;
  retryDelayMs: number;
  now?: () => number;
}

/** An in-memory job queue with delayed retries, for the webhook dispatcher. */
export class JobQueue<T> {
  private readonly pending: Job<T>[] = [];
  private readonly dead: Job<T>[] = [];
  private readonly now: () => number;

  constructor(private readonly options: QueueOptions) {
    this.now = options.now ?? Date.now;
  }

  enqueue(id: string, payload: T): void {
    this.pending.push({ id, payload, attempts: 0, notBefore: this.now() });
  }

  /** The first job that is due, removed from the queue; undefined when none is due. */
  take(): Job<T> | undefined {
    const now = this.now();
    const index = this.pending.findIndex((job) => job.notBefore <= now);
    if (index === -1) {
      return undefined;
    }
    return this.pending.splice(index, 1)[0];
  }

  fail(job: Job<T>): void {
    job.attempts += 1;
    if (job.attempts >= this.options.maxAttempts) {
      this.dead.push(job);
      return;
    }
    job.notBefore = this.now() + this.options.retryDelayMs * job.attempts;
    this.pending.push(job);
  }

  get deadLetters(): readonly Job<T>[] {
    return this.dead;
  }
}
