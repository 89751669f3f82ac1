/** One finding of the chaos checker: a stable rule name (see `ViolationName` in checker.ts) and where. */
export interface Violation {
  readonly name: string;
  readonly message: string;
  readonly atMs?: number | undefined;
  readonly process?: string | undefined;
  readonly resource?: string | undefined;
  readonly taskId?: string | undefined;
  readonly token?: string | undefined;
}
