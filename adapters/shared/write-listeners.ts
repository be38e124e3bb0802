/** The listeners of Store.onWrite, kept the same way by every adapter. */
export class WriteListeners {
  private readonly listeners: (() => void)[] = [];

  add(listener: () => void): void {
    this.listeners.push(listener);
  }

  /** A write has ended (committed or failed); called before its caller is answered. */
  tell(): void {
    for (const listener of this.listeners) listener();
  }
}
