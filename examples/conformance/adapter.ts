/**
 * The conformance adapter for the TypeScript Loom agent: the protocol of
 * docs/conformance.md, JSON Lines on stdin/stdout, one reply per request. It translates
 * the table's names (events, parameters, variables) to and from the agent's types; the
 * agent itself knows nothing of the protocol. stdout carries nothing but replies.
 *
 *   npm run build
 *   agentfsm conform spec/loom-agent.yaml --adapter "node examples/conformance/dist/adapter.js"
 */
import { createInterface } from "node:readline";
import { Agent, MAX_TOOLS, type AgentEvent, type AgentState, type ErrorOrigin, type LlmEvent } from "./loom.js";

const MACHINE = "loom-agent";

type Json = null | boolean | number | string | readonly Json[] | { readonly [key: string]: Json };
type Reply = { readonly [key: string]: Json };

/** The table's variables. */
interface Vars {
  readonly retries: number;
  readonly pending: number;
  readonly failed: number;
  readonly mutated: boolean;
  readonly origin: number;
}

/** The table's constants Llm, Tool and Io: the values of its `origin` variable. */
const ORIGIN: { readonly [origin in ErrorOrigin]: number } = { Llm: 0, Tool: 1, Io: 2 };

/** A request this adapter cannot serve; its message becomes the `error` of the reply. */
class BadRequest extends Error {}

/**
 * The table's variables, read off the state's data. A variable the state does not carry
 * has the value the table gives it there (the vectors check this). ShuttingDown carries
 * nothing (the agent is dropped), so its replies report no vars; the protocol allows it.
 */
function tableVars(state: AgentState): Vars | undefined {
  const idle = { retries: 0, pending: 0, failed: 0, mutated: false, origin: ORIGIN.Llm };
  switch (state.kind) {
    case "WaitingForUserInput":
      return idle;
    case "CallingLlm":
      return { ...idle, retries: state.retries };
    case "ExecutingTools":
      return { ...idle, retries: state.retries, pending: state.pending, failed: state.failed, mutated: state.mutated };
    case "PostToolsHook":
      return { ...idle, retries: state.retries, mutated: true };
    case "Error":
      return errorVars(state, idle);
    case "ShuttingDown":
      return undefined;
  }
}

/** Error's variables: its origin's data (an Io error comes from the hook, after a mutation). */
function errorVars(state: Extract<AgentState, { kind: "Error" }>, idle: Vars): Vars {
  switch (state.origin) {
    case "Llm":
      return { ...idle, retries: state.retries };
    case "Tool":
      return { ...idle, retries: state.retries, failed: state.failed, mutated: state.mutated, origin: ORIGIN.Tool };
    case "Io":
      return { ...idle, retries: state.retries, mutated: true, origin: ORIGIN.Io };
  }
}

/** An event's parameters, taken one by one, so that an unknown extra one is refused. */
class Params {
  readonly #given: { readonly [name: string]: unknown };
  readonly #taken = new Set<string>();

  constructor(
    readonly event: string,
    given: unknown,
  ) {
    if (typeof given !== "object" || given === null || Array.isArray(given)) {
      throw new BadRequest("params must be an object");
    }
    this.#given = given as { readonly [name: string]: unknown };
  }

  int(name: string, lo: number, hi: number): number {
    const value = this.#take(name);
    if (typeof value === "number" && Number.isInteger(value) && value >= lo && value <= hi) return value;
    throw this.#bad(name);
  }

  bool(name: string): boolean {
    const value = this.#take(name);
    if (typeof value === "boolean") return value;
    throw this.#bad(name);
  }

  /** Refuse the parameters nobody took. */
  done(): void {
    const extra = Object.keys(this.#given).find((name) => !this.#taken.has(name));
    if (extra !== undefined) throw new BadRequest(`event ${this.event} has no parameter ${extra}`);
  }

  #take(name: string): unknown {
    this.#taken.add(name);
    return Object.hasOwn(this.#given, name) ? this.#given[name] : undefined;
  }

  #bad(name: string): BadRequest {
    return new BadRequest(`bad or missing parameter ${name} of ${this.event}`);
  }
}

const llm = (event: LlmEvent): AgentEvent => ({ kind: "LlmEvent", event });

/** The table's events, by name, built from their parameters. */
const EVENTS: { readonly [name: string]: (params: Params) => AgentEvent } = {
  UserInput: () => ({ kind: "UserInput" }),
  TextDelta: () => llm({ kind: "TextDelta" }),
  ToolCallDelta: () => llm({ kind: "ToolCallDelta" }),
  LlmCompleted: (p) => llm({ kind: "Completed", toolCalls: p.int("tool_calls", 0, MAX_TOOLS) }),
  LlmError: () => llm({ kind: "Error" }),
  ToolProgress: () => ({ kind: "ToolProgress" }),
  ToolCompleted: (p) => ({ kind: "ToolCompleted", mutating: p.bool("mutating") }),
  ToolExecutionFailed: () => ({ kind: "ToolExecutionFailed" }),
  PostToolsHookCompleted: (p) => ({ kind: "PostToolsHookCompleted", actionTaken: p.bool("action_taken") }),
  PostToolsHookFailed: () => ({ kind: "PostToolsHookFailed" }),
  RetryTimeoutFired: () => ({ kind: "RetryTimeoutFired" }),
  ShutdownRequested: () => ({ kind: "ShutdownRequested" }),
};

function decodeEvent(name: unknown, given: unknown): AgentEvent {
  const build = typeof name === "string" && Object.hasOwn(EVENTS, name) ? EVENTS[name] : undefined;
  if (build === undefined) throw new BadRequest(`unknown event ${JSON.stringify(name)}`);
  const params = new Params(name as string, given ?? {});
  const event = build(params);
  params.done();
  return event;
}

function withVars(reply: Reply, state: AgentState): Reply {
  const vars = tableVars(state);
  return vars === undefined ? reply : { ...reply, vars: { ...vars } };
}

/** Serves requests against one agent, replaced by a fresh one on every reset. */
class Session {
  #agent = new Agent();

  /** The reply to one request, or null when the request says to quit. */
  handle(request: { readonly [key: string]: unknown }): Reply | null {
    switch (request["op"]) {
      case "reset":
        if (request["machine"] !== MACHINE) throw new BadRequest(`this adapter runs ${MACHINE} only`);
        this.#agent = new Agent();
        return withVars({ ok: true, state: this.#agent.state.kind }, this.#agent.state);
      case "event": {
        const outcome = this.#agent.handleEvent(decodeEvent(request["event"], request["params"]));
        const state = this.#agent.state;
        return withVars({ ok: true, accepted: outcome.accepted, state: state.kind, actions: [...outcome.actions] }, state);
      }
      case "quit":
        return null;
      default:
        throw new BadRequest(`unknown op ${JSON.stringify(request["op"])}`);
    }
  }
}

function answer(session: Session, line: string): Reply | null {
  let request: unknown;
  try {
    request = JSON.parse(line);
  } catch {
    return { ok: false, error: "request is not JSON" };
  }
  if (typeof request !== "object" || request === null || Array.isArray(request)) {
    return { ok: false, error: "request is not a JSON object" };
  }
  try {
    return session.handle(request as { readonly [key: string]: unknown });
  } catch (error) {
    if (error instanceof BadRequest) return { ok: false, error: error.message };
    throw error;
  }
}

const session = new Session();
const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on("line", (line) => {
  if (!line.trim()) return;
  const reply = answer(session, line);
  if (reply === null) {
    lines.close();
    return;
  }
  process.stdout.write(JSON.stringify(reply) + "\n");
});
// Exit once every reply written so far has reached stdout: a pipe's writes are
// asynchronous, and exiting at once would drop the replies still queued.
lines.on("close", () => process.stdout.write("", () => process.exit(0)));
