/**
 * A virtual list over a server-side filtered, paged collection: only the rows in view (plus a
 * margin) exist in the DOM, and only the pages they fall on are fetched. Fixed row height; a spacer
 * gives the scrollbar the height of all `total` rows. 10k rows cost one page of DOM and one page
 * of JSON.
 */

export interface Page<T> {
  readonly total: number;
  readonly items: readonly T[];
}

export interface VirtualListOptions<T> {
  readonly viewport: HTMLElement;
  readonly rowHeight: number;
  readonly pageSize: number;
  readonly fetchPage: (offset: number, limit: number) => Promise<Page<T>>;
  readonly render: (row: T) => HTMLElement;
  readonly keyOf: (row: T) => string;
  /** After each fetch of page 0 (e.g. to show the total). */
  readonly onTotal?: (total: number) => void;
}

export class VirtualList<T> {
  readonly #o: VirtualListOptions<T>;
  readonly #spacer: HTMLElement;
  readonly #rows: HTMLElement;
  #pages = new Map<number, readonly T[]>();
  #loading = new Set<number>();
  #total = 0;
  #generation = 0;
  #scheduled = false;

  constructor(options: VirtualListOptions<T>) {
    this.#o = options;
    this.#spacer = document.createElement('div');
    this.#spacer.className = 'vl-spacer';
    this.#rows = document.createElement('div');
    this.#rows.className = 'vl-rows';
    this.#spacer.append(this.#rows);
    options.viewport.append(this.#spacer);
    options.viewport.addEventListener('scroll', () => {
      this.#schedule();
    });
  }

  get total(): number {
    return this.#total;
  }

  /** Forget every page and fetch the visible ones again (a filter changed, or the data did). */
  refresh(): void {
    this.#generation += 1;
    this.#loading.clear();
    void this.#load(this.#visiblePages(), true);
  }

  /** Replace a loaded row in place (a pushed change), if it is loaded. */
  patch(row: T): void {
    const key = this.#o.keyOf(row);
    for (const [index, items] of this.#pages) {
      const at = items.findIndex((r) => this.#o.keyOf(r) === key);
      if (at >= 0) {
        const copy = [...items];
        copy[at] = row;
        this.#pages.set(index, copy);
        this.#schedule();
      }
    }
  }

  #visiblePages(): number[] {
    const { viewport, rowHeight, pageSize } = this.#o;
    const first = Math.max(0, Math.floor(viewport.scrollTop / rowHeight) - 10);
    const last = Math.ceil((viewport.scrollTop + viewport.clientHeight) / rowHeight) + 10;
    const pages: number[] = [];
    for (let p = Math.floor(first / pageSize); p <= Math.floor(last / pageSize); p += 1) pages.push(p);
    return pages;
  }

  async #load(pages: readonly number[], replace: boolean): Promise<void> {
    const generation = this.#generation;
    const wanted = pages.filter((p) => replace || (!this.#pages.has(p) && !this.#loading.has(p)));
    for (const p of wanted) this.#loading.add(p);
    const results = await Promise.all(
      wanted.map(async (p) => {
        try {
          return { p, page: await this.#o.fetchPage(p * this.#o.pageSize, this.#o.pageSize) };
        } catch {
          return { p, page: undefined };
        }
      }),
    );
    if (generation !== this.#generation) return; // a newer refresh owns the list
    if (replace) this.#pages = new Map();
    for (const { p, page } of results) {
      this.#loading.delete(p);
      if (page === undefined) continue;
      this.#pages.set(p, page.items);
      this.#total = page.total;
    }
    this.#o.onTotal?.(this.#total);
    this.#draw();
  }

  #schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    requestAnimationFrame(() => {
      this.#scheduled = false;
      const missing = this.#visiblePages().filter((p) => !this.#pages.has(p));
      if (missing.length > 0) void this.#load(missing, false);
      this.#draw();
    });
  }

  #draw(): void {
    const { viewport, rowHeight, pageSize } = this.#o;
    this.#spacer.style.height = `${this.#total * rowHeight}px`;
    const first = Math.max(0, Math.floor(viewport.scrollTop / rowHeight) - 5);
    const last = Math.min(this.#total, Math.ceil((viewport.scrollTop + viewport.clientHeight) / rowHeight) + 5);
    const nodes: HTMLElement[] = [];
    for (let i = first; i < last; i += 1) {
      const row = this.#pages.get(Math.floor(i / pageSize))?.[i % pageSize];
      if (row === undefined) continue;
      const node = this.#o.render(row);
      node.style.transform = `translateY(${i * rowHeight}px)`;
      node.style.height = `${rowHeight}px`;
      nodes.push(node);
    }
    this.#rows.replaceChildren(...nodes);
  }
}
