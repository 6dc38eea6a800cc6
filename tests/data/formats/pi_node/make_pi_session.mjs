// Writes a session file with pi's own SessionManager (@mariozechner/pi-coding-agent).
import { pathToFileURL } from "node:url";
// $PI_CODING_AGENT: the installed package directory (node_modules/@mariozechner/pi-coding-agent).
const where = process.env.PI_CODING_AGENT;
const { SessionManager } = await import(
  where ? pathToFileURL(`${where}/dist/index.js`).href : "@mariozechner/pi-coding-agent");
const [, , dir] = process.argv;
const sm = SessionManager.create("/home/dev/calc", dir);
const t = Date.now();
const usage = (i, o, c) => ({ input: i, output: o, cacheRead: 0, cacheWrite: 0, totalTokens: i + o,
  cost: { input: c / 2, output: c / 2, cacheRead: 0, cacheWrite: 0, total: c } });
const assistant = (content, stopReason, model = "claude-sonnet-4-5") => ({ role: "assistant", content,
  api: "anthropic-messages", provider: "anthropic", model, usage: usage(1200, 60, 0.0045),
  stopReason, timestamp: t });
sm.appendModelChange("anthropic", "claude-sonnet-4-5");
sm.appendThinkingLevelChange("high");
const task = sm.appendMessage({ role: "user", content: "add() in calc.py returns the wrong sum", timestamp: t });
sm.appendMessage(assistant([
  { type: "thinking", thinking: "Read calc.py first.", thinkingSignature: "EqQBCkgIBxABGAIiQK1r" },
  { type: "text", text: "Reading calc.py." },
  { type: "toolCall", id: "toolu_01Calc", name: "read", arguments: { path: "calc.py" } }], "toolUse"));
sm.appendMessage({ role: "toolResult", toolCallId: "toolu_01Calc", toolName: "read",
  content: [{ type: "text", text: "def add(a, b):\n    return a - b\n" }], isError: false, timestamp: t });
const diag = sm.appendMessage(assistant([{ type: "text", text: "add() subtracts. Fix: return a + b." }], "stop"));
sm.appendLabelChange(diag, "diagnosis");
sm.appendMessage({ role: "user", content: "Also make it accept floats only.", timestamp: t });
sm.appendMessage(assistant([{ type: "text", text: "Added a float check that raises TypeError." }], "stop"));
sm.branchWithSummary(diag, "Tried a float-only check; the user rejected it as too strict.",
  { readFiles: ["calc.py"], modifiedFiles: ["calc.py"] });
sm.appendModelChange("openai", "gpt-5");
sm.appendMessage({ role: "user", content: [{ type: "text", text: "Just fix the sign, nothing else." }], timestamp: t });
const fixed = sm.appendMessage(assistant([{ type: "text", text: "Fixed: return a + b." }], "stop", "gpt-5"));
sm.appendCompaction("## Goal\nFix add() in calc.py.\n\n## Done\n- add() returns a + b.", fixed, 48000,
  { readFiles: ["calc.py"] });
sm.appendCustomMessageEntry("reminder", "Run the tests before you finish.", true);
sm.appendCustomEntry("todo-state", { open: ["tests"] });
sm.appendSessionInfo("calc sign bug");
sm.appendMessage({ role: "user", content: "Run the tests.", timestamp: t });
sm.appendMessage({ role: "bashExecution", command: "pytest -q", output: "4 passed in 0.01s",
  exitCode: 0, cancelled: false, truncated: false, timestamp: t });
console.log(sm.getSessionFile());
