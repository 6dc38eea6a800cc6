// Opens a session file with pi's SessionManager and prints what pi sees, as JSON.
import { pathToFileURL } from "node:url";
// $PI_CODING_AGENT: the installed package directory (node_modules/@mariozechner/pi-coding-agent).
const where = process.env.PI_CODING_AGENT;
const { SessionManager } = await import(
  where ? pathToFileURL(`${where}/dist/index.js`).href : "@mariozechner/pi-coding-agent");
const sm = SessionManager.open(process.argv[2]);
const entries = sm.getEntries();
const ctx = sm.buildSessionContext();
const labels = {};
for (const e of entries) { const l = sm.getLabel(e.id); if (l) labels[e.id] = l; }
console.log(JSON.stringify({
  header: sm.getHeader(), leafId: sm.getLeafId(), name: sm.getSessionName() ?? null,
  entries: entries.map((e) => [e.id, e.parentId, e.type]), labels,
  thinkingLevel: ctx.thinkingLevel, model: ctx.model,
  context: ctx.messages.map((m) => m.role),
}));
