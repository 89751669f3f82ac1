/**
 * Typecheck-only (no test runs it): the browser's copy of the console API shapes
 * (`packages/coordinator/ui/console-api.ts`) and the server's (`src/http/console/console-types.ts`)
 * must be the same types. A field added, removed or changed on one side fails `pnpm typecheck`.
 */
import type * as Browser from '../../packages/coordinator/ui/console-api.js';
// eslint-disable-next-line no-restricted-imports -- a type-only check of the server's own file, not a runtime import
import type * as Server from '../../packages/coordinator/src/http/console/console-types.js';

type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type Assert<T extends true> = T;

export type ConsoleTypesAgree = [
  Assert<Same<Browser.ConsoleResourceRow, Server.ConsoleResourceRow>>,
  Assert<Same<Browser.ConsoleTaskRow, Server.ConsoleTaskRow>>,
  Assert<Same<Browser.ConsoleSessionRow, Server.ConsoleSessionRow>>,
  Assert<Same<Browser.ConsolePage<string>, Server.ConsolePage<string>>>,
  Assert<Same<Browser.ConsoleFeedItem, Server.ConsoleFeedItem>>,
  Assert<Same<Browser.ConsoleTimeline, Server.ConsoleTimeline>>,
  Assert<Same<Browser.ConsoleHello, Server.ConsoleHello>>,
  Assert<Same<Browser.ConsoleLeases, Server.ConsoleLeases>>,
];
