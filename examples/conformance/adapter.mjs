#!/usr/bin/env node
// @ts-check
/**
 * The conformance adapter for the JavaScript Loom agent: the protocol of
 * docs/conformance.md, JSON Lines on stdin/stdout, one reply per request. Logs go to
 * stderr only; stdout carries nothing but replies.
 *
 *   agentfsm conform spec/loom-agent.yaml --adapter "node examples/conformance/adapter.mjs"
 */
import { createInterface } from "node:readline";
import { LoomAgent, validate } from "./loom.mjs";

const MACHINE = "loom-agent";
let agent = new LoomAgent();

/**
 * @param {Record<string, unknown>} request
 * @returns {Record<string, unknown> | null} the reply, or null to quit
 */
function handle(request) {
  switch (request.op) {
    case "reset":
      if (request.machine !== MACHINE) return { ok: false, error: `this adapter runs ${MACHINE} only` };
      agent = new LoomAgent();
      return { ok: true, state: agent.state, vars: agent.vars() };
    case "event": {
      const event = String(request.event);
      const params = request.params ?? {};
      const problem = validate(event, params);
      if (problem) return { ok: false, error: problem };
      const outcome = agent.step(event, /** @type {Record<string, number | boolean>} */ (params));
      return { ok: true, ...outcome, vars: agent.vars() };
    }
    case "quit":
      return null;
    default:
      return { ok: false, error: `unknown op ${JSON.stringify(request.op)}` };
  }
}

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on("line", (line) => {
  if (!line.trim()) return;
  let request;
  try {
    request = JSON.parse(line);
  } catch {
    process.stdout.write(JSON.stringify({ ok: false, error: "request is not JSON" }) + "\n");
    return;
  }
  const reply = handle(request);
  if (reply === null) {
    lines.close();
    return;
  }
  process.stdout.write(JSON.stringify(reply) + "\n");
});
lines.on("close", () => process.exit(0));
