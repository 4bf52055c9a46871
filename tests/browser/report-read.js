// What the report page shows now, read by tests/test_report_browser.py: the highlighted state, the fired
// rows, the variables and their change marks, the instance columns and the chart's cursor.
const read = () => {
const q = (s) => document.querySelector(s);
const fired = new Set();
for (const g of document.querySelectorAll('#diagram .fired')) for (const r of g.getAttribute('data-rows').split(' ')) fired.add(Number(r));
return {
  hash: location.hash,
  position: q('#position').textContent,
  status: q('#status').textContent,
  current: [...document.querySelectorAll('#diagram g.node.current')].map((g) => g.getAttribute('data-state')),
  label: [...document.querySelectorAll('#diagram text.now-label')].length,
  svgRows: [...fired].sort((a, b) => a - b),
  tableRows: [...document.querySelectorAll('#rows tr.fired')].map((tr) => Number(tr.getAttribute('data-row'))),
  firedText: [...document.querySelectorAll('#rows tr.fired .fired-cell')].map((td) => td.textContent),
  vars: [...document.querySelectorAll('#vars tbody tr')].map((tr) => [tr.getAttribute('data-name'), tr.querySelector('.value').textContent, tr.querySelector('.change').textContent]),
  compare: [...document.querySelectorAll('#compare tbody tr')].map((tr) => [...tr.children].map((td) => td.textContent)),
  instances: [...document.querySelectorAll('#instances section')].map((s) => ({
    name: s.getAttribute('data-instance'), state: s.querySelector('.inst-state').textContent,
    mailbox: s.querySelector('.mailbox').textContent, acting: s.querySelector('.acting').textContent,
    vars: [...s.querySelectorAll('.value')].map((td) => td.textContent),
    changes: [...s.querySelectorAll('.change')].map((td) => td.textContent)})),
  now: [...document.querySelectorAll('#chart g.item.now')].map((g) => Number(g.getAttribute('data-step'))),
  later: document.querySelectorAll('#chart g.item.later').length,
};
};
