// Parse Mermaid texts with Mermaid's own parser (the one GitHub runs in the browser).
// Input on stdin: a JSON array of texts. Output: a JSON array, for each text the type of
// diagram it parses as ({"type": "stateDiagram"}), else the parser's message ({"error": ...}). Node has no DOM, so DOMPurify (which Mermaid only
// uses to sanitise labels for display) is replaced by a pass-through before Mermaid loads.
import DOMPurify from 'dompurify';

for (const hook of ['addHook', 'removeHook', 'removeHooks', 'removeAllHooks']) DOMPurify[hook] = () => {};
DOMPurify.sanitize = (text) => text;
const { default: mermaid } = await import('mermaid');

let input = '';
for await (const chunk of process.stdin) input += chunk;
const results = [];
for (const text of JSON.parse(input)) {
  try {
    const parsed = await mermaid.parse(text);
    results.push({ type: parsed.diagramType });
  } catch (error) {
    results.push({ error: String(error.message ?? error) });
  }
}
process.stdout.write(JSON.stringify(results));
