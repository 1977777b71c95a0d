/** Small DOM helpers shared by the pages. Text always goes in as text, never as HTML. */

export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Readonly<Record<string, string>> = {},
  ...children: ReadonlyArray<Node | string>
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, value);
  node.append(...children);
  return node;
}

/** The element with `id`; a page without it is a bug. */
export function byId<T extends HTMLElement = HTMLElement>(id: string): T {
  const node = document.getElementById(id);
  if (node === null) throw new Error(`page has no #${id}`);
  return node as T;
}

/** Replaces a table body's rows; `empty` is shown as one full-width row when there are none. */
export function fillRows(tbody: HTMLTableSectionElement, rows: ReadonlyArray<ReadonlyArray<Node | string>>, empty: string): void {
  const columns = tbody.closest('table')?.querySelectorAll('thead th').length ?? 1;
  tbody.replaceChildren(
    ...(rows.length === 0
      ? [el('tr', {}, el('td', { colspan: String(columns), class: 'empty' }, empty))]
      : rows.map((cells) => el('tr', {}, ...cells.map((c) => el('td', {}, c))))),
  );
}
