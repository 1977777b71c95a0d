/**
 * The deployment page (served at `/deploy`, and as one static file for the
 * docs): the form is the state; every change re-plans with deploy-model and
 * redraws the output.
 */
import { CONFIG_SCHEMA } from './config-schema.generated.js';
import { CONFIG_PATH, UNIT_PATH, limitFields, newSecret, plan, type DeployInput, type DeployPlan, type Mode, type NodeInput } from './deploy-model.js';
import { byId, el } from './dom.js';

const form = byId<HTMLFormElement>('form');
const nodeRows = byId('nodes').querySelector('tbody')!;
let downloadUrls: string[] = [];
let lastInput = '';

function secret(): string {
  return newSecret(crypto.getRandomValues(new Uint8Array(32)));
}

function input(id: string): HTMLInputElement {
  return byId<HTMLInputElement>(id);
}

// --- nodes ---

const NODE_FIELDS = [
  ['name', 'name'],
  ['address', 'client address (HOST:PORT)'],
  ['http', 'admin listener (HOST:PORT, empty for 127.0.0.1 at client port + 4000, off for none)'],
  ['dataDir', 'data directory'],
] as const;

function addNode(): void {
  // The first number no row's name uses yet, so a new row never clashes.
  const names = new Set([...nodeRows.querySelectorAll<HTMLInputElement>('[data-field="name"]')].map((i) => i.value.trim()));
  let n = 1;
  while (names.has(`lock-${n}`)) n++;
  const v: NodeInput = { name: `lock-${n}`, address: `10.0.0.${n}:5225`, http: '127.0.0.1:9225', dataDir: '/var/lib/ticketing' };
  const row = el('tr', {}, el('td', { class: 'index' }));
  for (const [field] of NODE_FIELDS) {
    row.append(el('td', {}, el('input', { type: 'text', 'data-field': field, value: v[field], spellcheck: 'false' })));
  }
  const move = (dir: -1 | 1) => () => {
    const other = dir < 0 ? row.previousElementSibling : row.nextElementSibling;
    if (other !== null && dir < 0) other.before(row);
    if (other !== null && dir > 0) other.after(row);
    update();
  };
  row.append(
    el('td', {}, button('↑', 'up', move(-1)), ' ', button('↓', 'down', move(1)), ' ', button('✕', 'remove', () => {
      row.remove();
      update();
    })),
  );
  nodeRows.append(row);
}

function button(text: string, action: string, onClick: () => void): HTMLButtonElement {
  const b = el('button', { type: 'button', 'data-action': action }, text);
  b.addEventListener('click', onClick);
  return b;
}

/** Row numbers and accessible names follow the order. */
function labelRows(): void {
  [...nodeRows.children].forEach((row, i) => {
    row.querySelector('.index')!.textContent = String(i + 1);
    for (const [field, label] of NODE_FIELDS) row.querySelector(`[data-field="${field}"]`)!.setAttribute('aria-label', `Node ${i + 1} ${label}`);
    for (const b of row.querySelectorAll('button')) b.setAttribute('aria-label', `${b.dataset.action ?? ''} node ${i + 1}`);
  });
}

// --- reading the form ---

function readInput(): DeployInput {
  const nodes = [...nodeRows.children].map((row) => {
    const get = (field: string) => (row.querySelector<HTMLInputElement>(`[data-field="${field}"]`)!.value).trim();
    return { name: get('name'), address: get('address'), http: get('http'), dataDir: get('dataDir') };
  });
  const limits: Record<string, number> = {};
  for (const field of limitFields()) limits[field.key] = Number(input(`limit-${field.key}`).value);
  return {
    nodes,
    mode: (form.querySelector<HTMLInputElement>('input[name="mode"]:checked')?.value ?? 'priority') as Mode,
    clientTokens: input('use-client-tokens').checked ? byId<HTMLTextAreaElement>('client-tokens').value.split('\n').map((t) => t.trim()).filter((t) => t !== '') : [],
    peerToken: input('peer-token').value.trim(),
    httpToken: input('use-http-token').checked ? input('http-token').value.trim() : '',
    tls: input('tls').checked,
    tlsDir: input('tls-dir').value.trim().replace(/\/+$/, ''),
    limits,
    logLevel: byId<HTMLSelectElement>('log-level').value,
    installDir: input('install-dir').value.trim().replace(/\/+$/, ''),
    secretsDir: input('secrets-dir').value.trim().replace(/\/+$/, ''),
  };
}

// --- output ---

function download(name: string, text: string): HTMLAnchorElement {
  const url = URL.createObjectURL(new Blob([text], { type: 'text/plain' }));
  downloadUrls.push(url);
  return el('a', { href: url, download: name, class: 'button' }, `Download ${name}`);
}

function render(p: DeployPlan, count: number, mode: Mode): void {
  for (const url of downloadUrls) URL.revokeObjectURL(url);
  downloadUrls = [];
  byId('problems').replaceChildren(...p.problems.map((x) => el('li', {}, x)));
  byId('warnings').replaceChildren(...p.warnings.map((x) => el('li', {}, x)));
  for (const row of byId('tolerance').querySelectorAll<HTMLElement>('tbody tr')) {
    row.classList.toggle('current', mode === 'priority' && Number(row.dataset.count) === Math.min(count, 4));
  }
  byId('tolerance-now').textContent =
    `${count} node${count === 1 ? '' : 's'} in ${count > 1 ? `${mode} mode` : 'a single node'}: ` +
    `${p.tolerance.uninterrupted ? 'uninterrupted' : 'not uninterrupted'}, tolerates ${p.tolerance.failures === 0 ? 'no failure' : `${p.tolerance.failures} failed node${p.tolerance.failures === 1 ? '' : 's'}`}.`;

  const usable = p.problems.length === 0;
  byId('steps').replaceChildren(
    ...p.steps.map((step) => {
      const li = el('li', {}, el('h3', {}, step.title), el('p', {}, step.text));
      if (step.code !== undefined) li.append(el('pre', {}, step.code));
      const node = p.nodes.find((x) => x.name === step.node);
      if (node !== undefined) {
        li.append(
          el(
            'div',
            { class: 'node-output' },
            el('p', {}, `${node.configFile} (install as ${CONFIG_PATH}):`),
            el('pre', { 'data-config': node.name }, node.yaml),
            el('p', {}, `${node.unitFile} (install as ${UNIT_PATH}):`),
            el('pre', {}, node.unit),
            ...node.secrets.map((f) => el('p', {}, `${f.file} (install as ${f.path}; a secret: mode 640, group ticketing)`)),
            usable
              ? el('p', {}, download(node.configFile, node.yaml), ' ', download(node.unitFile, node.unit), ...node.secrets.flatMap((f) => [' ', download(f.file, f.text)]))
              : el('p', { class: 'hint' }, 'Fix the problems above to download the files.'),
          ),
        );
      }
      return li;
    }),
  );
  byId('client-ts').textContent = p.clients.typescript;
  byId('client-kotlin').textContent = p.clients.kotlin;
  byId('client-java').textContent = p.clients.java;
}

function update(): void {
  labelRows();
  const count = nodeRows.children.length;
  for (const radio of form.querySelectorAll<HTMLInputElement>('input[name="mode"]')) radio.disabled = count < 2;
  input('peer-token').disabled = count < 2;
  byId<HTMLTextAreaElement>('client-tokens').disabled = !input('use-client-tokens').checked;
  input('http-token').disabled = !input('use-http-token').checked;
  input('tls-dir').disabled = !input('tls').checked;
  const data = readInput();
  // Redraw only on a real change: a redraw replaces the download links, and
  // one under the pointer would swallow the click.
  const key = JSON.stringify(data);
  if (key === lastInput) return;
  lastInput = key;
  render(plan(data), count, data.mode);
}

// --- set-up ---

function setUp(): void {
  const limits = byId('limits');
  for (const f of limitFields()) {
    const id = `limit-${f.key}`;
    const attrs: Record<string, string> = { type: 'number', id, value: typeof f.default === 'number' ? String(f.default) : '', step: '1', 'aria-describedby': `${id}-hint` };
    if (f.minimum !== undefined) attrs.min = String(f.minimum);
    if (f.maximum !== undefined) attrs.max = String(f.maximum);
    limits.append(el('div', {}, el('label', { for: id }, f.key), el('input', attrs), el('span', { class: 'hint', id: `${id}-hint` }, f.description ?? '')));
  }
  const levels = CONFIG_SCHEMA.properties?.['log-level'];
  const logLevel = byId<HTMLSelectElement>('log-level');
  for (const level of levels?.enum ?? []) logLevel.append(el('option', level === levels?.default ? { selected: '' } : {}, String(level)));

  byId<HTMLTextAreaElement>('client-tokens').value = secret();
  input('peer-token').value = secret();
  input('http-token').value = secret();
  addNode();
  addNode();

  byId('add-node').addEventListener('click', () => {
    addNode();
    update();
  });
  byId('add-client-token').addEventListener('click', () => {
    const area = byId<HTMLTextAreaElement>('client-tokens');
    area.value = `${area.value.trim()}\n${secret()}`.trim();
    input('use-client-tokens').checked = true;
    update();
  });
  byId('new-peer-token').addEventListener('click', () => {
    input('peer-token').value = secret();
    update();
  });
  byId('new-http-token').addEventListener('click', () => {
    input('http-token').value = secret();
    input('use-http-token').checked = true;
    update();
  });
  form.addEventListener('input', update);
  form.addEventListener('submit', (e) => e.preventDefault());
  update();
}

setUp();
